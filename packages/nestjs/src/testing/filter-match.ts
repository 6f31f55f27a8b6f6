import type { CloudEvent } from 'cloudevents';
import type { MeshFilter } from '../mesh-handler.decorators';

/** Whether `event` passes `filter`, for the dialects InMemoryEventMeshClient supports (all but `sql`). */
export function matches(filter: MeshFilter, event: CloudEvent<unknown>): boolean {
  const attr = (name: string) => {
    const value = (event as unknown as Record<string, unknown>)[name];
    return value === undefined ? undefined : String(value);
  };
  const each = (pairs: Record<string, string>, test: (value: string, wanted: string) => boolean) =>
    Object.entries(pairs).every(([name, wanted]) => {
      const value = attr(name);
      return value !== undefined && test(value, wanted);
    });
  if ('exact' in filter) return each(filter.exact, (v, w) => v === w);
  if ('prefix' in filter) return each(filter.prefix, (v, w) => v.startsWith(w));
  if ('suffix' in filter) return each(filter.suffix, (v, w) => v.endsWith(w));
  if ('all' in filter) return filter.all.every((f) => matches(f, event));
  if ('any' in filter) return filter.any.some((f) => matches(f, event));
  if ('not' in filter) return !matches(filter.not, event);
  throw new Error('sql filters are not supported by InMemoryEventMeshClient');
}
