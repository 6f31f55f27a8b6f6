import { contextAttributes } from './cloudevent-attributes';
import type { EventFrame } from './event-frame';

/**
 * The CloudEvents HTTP binding, binary content mode, for outbound deliveries: `ce-<name>` headers (values
 * percent-encoded where the binding requires it), `content-type` from `datacontenttype`, the data as the body.
 */
export function frameToHttpBinary(frame: EventFrame): { headers: Record<string, string>; body: Buffer | undefined } {
  const headers: Record<string, string> = {};
  for (const [name, value] of contextAttributes(frame)) headers[`ce-${name}`] = percentEncode(value);
  if (frame.datacontenttype !== undefined) headers['content-type'] = frame.datacontenttype;
  return { headers, body: frame.data };
}

/** Encodes space, `"`, `%` and everything outside printable ASCII, as the HTTP binding (3.1.3.2) asks. */
function percentEncode(value: string): string {
  let out = '';
  for (const ch of value) {
    const code = ch.codePointAt(0) ?? 0;
    if (code > 0x20 && code < 0x7f && ch !== '"' && ch !== '%') out += ch;
    else
      out += Array.from(Buffer.from(ch, 'utf8'), (b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
  }
  return out;
}
