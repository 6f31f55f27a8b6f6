import { randomUUID } from 'node:crypto';
import { CloudEvent, type CloudEventV1 } from 'cloudevents';

/** What `publish` takes: a `CloudEvent` of the `cloudevents` package, or its attributes (id and specversion may be left out). */
export type EventInput = CloudEvent<unknown> | Partial<CloudEventV1<unknown>>;

/**
 * The event in the CloudEvents JSON format, as its JSON text: `id` a fresh UUID and `specversion` `1.0` when missing,
 * `source` the client's default when missing, binary data as `data_base64`. The id is fixed here, once, so every
 * retry of the publish sends the same id and subscribers can dedupe.
 */
export function structuredJson(event: EventInput, defaultSource?: string): string {
  const attrs: Record<string, unknown> = event instanceof CloudEvent ? { ...event.toJSON() } : { ...event };
  attrs.id ??= randomUUID();
  attrs.specversion ??= '1.0';
  if (attrs.source === undefined && defaultSource !== undefined) attrs.source = defaultSource;
  if (attrs.data instanceof Uint8Array) {
    attrs.data_base64 = Buffer.from(attrs.data).toString('base64');
    delete attrs.data;
  }
  return JSON.stringify(attrs);
}

/** A structured CloudEvent the runtime sent, as a `CloudEvent` (not re-validated: the runtime validated it at publish). */
export function cloudEventOf(json: Record<string, unknown>): CloudEvent<unknown> {
  return new CloudEvent<unknown>(json as CloudEventV1<unknown>, false);
}
