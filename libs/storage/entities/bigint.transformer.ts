import type { ValueTransformer } from 'typeorm';

/** Postgres `bigint` comes back from `pg` as text; offsets and epochs stay far below 2^53, so numbers are safe. */
export const bigintAsNumber: ValueTransformer = {
  to: (value: number | null | undefined) => value,
  from: (value: string | null) => (value === null ? null : Number(value)),
};
