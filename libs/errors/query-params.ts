import { z } from 'zod';

/**
 * An integer query parameter from `min` to `max`, optional: the decimal digits of one (a leading `-` for a
 * negative one) read as a number, anything else (empty, `1.5`, ` 7`, repeated) refused. Its JSON Schema (the API
 * document's) is the integer's with its range, so a route that validates with it is documented with its limits.
 */
export function queryInt(min: number, max: number) {
  return z
    .preprocess(
      (v) => (typeof v === 'string' && /^-?\d{1,16}$/.test(v) ? Number(v) : v),
      z.number().int().min(min).max(max),
    )
    .optional();
}

/** Text Postgres can hold: no NUL (`\u0000`), which a text column or parameter refuses (a 500 if it were sent). */
export const pgText = () =>
  z
    .string()
    .refine((v) => !v.includes('\0'), 'no NUL character')
    .meta({ pattern: '^[^\\u0000]*$' });
