let isoMs = -1;
let iso = '';

/**
 * The time as ISO 8601, made once per millisecond: the log lines of one millisecond (audit records, access lines)
 * share one string instead of formatting a Date each.
 */
export function isoNow(): string {
  const now = Date.now();
  if (now !== isoMs) {
    isoMs = now;
    iso = new Date(now).toISOString();
  }
  return iso;
}
