import type { CloudEvent } from '@eventmesh/client';
import type { ColumnValue } from './table-config';

// How the table sink turns an event into a column's value.

/** How a column takes a value: as it is, an array as an array, or anything as JSON text. */
export type ValueKind = 'plain' | 'array' | 'json';

export function valueKindsOf(types: Map<string, { array: boolean; json: boolean }>): Map<string, ValueKind> {
  return new Map([...types].map(([name, t]) => [name, t.array ? 'array' : t.json ? 'json' : 'plain']));
}

/**
 * The event's value for a column: absent is NULL; binary data (a typed array) is a Buffer; for a JSON column any
 * other value is JSON text; for an array column an array is itself; otherwise an object is JSON text. A path walks
 * the data's own members only (`data.constructor` of data without one is NULL).
 */
export function valueOf(event: CloudEvent<unknown>, value: ColumnValue, kind: ValueKind): unknown {
  let v: unknown;
  if (value === 'data') v = event.data;
  else if (value.startsWith('data.')) {
    v = event.data;
    for (const key of value.slice(5).split('.'))
      v =
        typeof v === 'object' && v !== null && Object.hasOwn(v, key) ? (v as Record<string, unknown>)[key] : undefined;
  } else v = Object.hasOwn(event, value) ? (event as unknown as Record<string, unknown>)[value] : undefined;
  if (v === undefined || v === null) return null;
  if (ArrayBuffer.isView(v)) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  if (kind === 'json') return JSON.stringify(v);
  if (kind === 'array' && Array.isArray(v)) return v;
  return typeof v === 'object' && !(v instanceof Date) ? JSON.stringify(v) : v;
}
