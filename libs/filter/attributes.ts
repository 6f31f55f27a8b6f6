import { CE_SPECVERSION, type EventFrame, type ExtensionValue } from '@libs/frame';

/** CloudEvents attribute names: lower-case letters and digits only (CloudEvents 1.0, "Naming Conventions"). */
export const ATTRIBUTE_NAME = /^[a-z0-9]+$/;

/**
 * The value of the context attribute or extension `name`, or `undefined` when the event does not carry it.
 * Context attributes win over an extension of the same name (a valid event cannot have both anyway).
 */
export function attributeOf(frame: EventFrame, name: string): ExtensionValue | undefined {
  switch (name) {
    case 'specversion':
      // Filters are CloudEvents' (the subscriptions API): every event is delivered as a CloudEvents 1.0 event.
      return CE_SPECVERSION;
    case 'id':
    case 'source':
    case 'type':
    case 'subject':
    case 'time':
    case 'datacontenttype':
    case 'dataschema':
      return frame[name];
    default:
      // Own properties only: `constructor` or `tostring` are legal attribute names and must not reach
      // Object.prototype.
      return Object.hasOwn(frame.extensions, name) ? frame.extensions[name] : undefined;
  }
}

/** The attribute as text, the form the exact/prefix/suffix dialects compare (`7` -> "7", `true` -> "true"). */
export function attributeText(frame: EventFrame, name: string): string | undefined {
  const value = attributeOf(frame, name);
  return value === undefined ? undefined : String(value);
}
