/** Throws a `RangeError` naming `name` unless `value` is absent or a whole number from `min` to `max`. */
export function checkWhole(name: string, value: unknown, min: number, max: number): void {
  if (value !== undefined && !(Number.isInteger(value) && (value as number) >= min && (value as number) <= max))
    throw new RangeError(`${name} must be a whole number from ${min} to ${max}, not ${String(value)}`);
}
