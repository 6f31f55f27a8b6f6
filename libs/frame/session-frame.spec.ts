import { decodeFrame, encodeFrame } from '../../packages/client/src/streaming/frame';
import {
  SessionAttributes,
  SessionFrameKind,
  decodeSessionFrame,
  encodeSessionFrame,
  SESSION_FRAME_KINDS,
  SessionFrameError,
  sessionFrameDataBytes,
} from './session-frame';

describe('session frame', () => {
  it('round-trips every kind with its header fields, attributes and data', () => {
    for (const kind of SESSION_FRAME_KINDS) {
      const raw = encodeSessionFrame({
        kind,
        id: 'llm:0b5c9c0e-5a1e-4c55-9d44-1d7e1a2f3b4c',
        call: 7,
        n: 262144,
        attributes: { code: 'AGENT_GONE', status: 502, retry: true },
        data: Buffer.from('chunk ü'),
      });
      const frame = decodeSessionFrame(raw);
      expect(frame).toEqual({
        kind,
        id: 'llm:0b5c9c0e-5a1e-4c55-9d44-1d7e1a2f3b4c',
        call: 7,
        n: 262144,
        attributes: { code: 'AGENT_GONE', status: 502, retry: true },
        data: Buffer.from('chunk ü'),
      });
      expect(sessionFrameDataBytes(raw)).toBe(Buffer.byteLength('chunk ü'));
    }
  });

  it('is the encoding the SDK writes and reads (its own copy, byte for byte)', () => {
    const frames: {
      kind: SessionFrameKind;
      id: string;
      call?: number;
      n?: number;
      attributes?: SessionAttributes;
      data?: Buffer;
    }[] = [
      { kind: 'chunk', id: 'a:12345678', call: 1, data: Buffer.from([0, 1, 2, 255]) },
      { kind: 'credit', id: 'a:12345678', n: 4096 },
      { kind: 'error', id: 'a:12345678', call: 3, attributes: { code: 'X', message: 'm', scope: 'call' } },
      { kind: 'subscribe', id: 'room:abcdefgh', n: 2.5e9, attributes: { epoch: 3 } },
    ];
    for (const f of frames) {
      expect(encodeFrame(f)).toEqual(encodeSessionFrame(f));
      expect(decodeFrame(encodeSessionFrame(f))).toEqual(decodeSessionFrame(encodeFrame(f)));
    }
  });

  it('gives a chunk its data as a view of the message, with no copy', () => {
    const raw = encodeSessionFrame({ kind: 'chunk', id: 'a:12345678', data: Buffer.alloc(1000, 7) });
    expect(decodeSessionFrame(raw).data.buffer).toBe(raw.buffer);
  });

  it.each([
    ['shorter than the header', Buffer.alloc(10)],
    ['another version', Buffer.from([2, ...encodeSessionFrame({ kind: 'end', id: 'x' }).subarray(1)])],
    ['an unknown kind', Buffer.from([1, 99, ...encodeSessionFrame({ kind: 'end', id: 'x' }).subarray(2)])],
    [
      'lengths past the end',
      (() => {
        const raw = encodeSessionFrame({ kind: 'end', id: 'x' });
        raw.writeUInt16BE(500, 2);
        return raw;
      })(),
    ],
    [
      'attributes that are not a JSON object',
      (() => {
        const raw = encodeSessionFrame({ kind: 'end', id: 'x', attributes: { a: 1 } });
        raw.write('[', 21);
        return raw;
      })(),
    ],
    [
      'an attribute that is an object',
      (() => {
        const attributes = Buffer.from('{"a":{}}');
        const raw = encodeSessionFrame({ kind: 'end', id: 'x' });
        const out = Buffer.concat([raw, attributes]);
        out.writeUInt32BE(attributes.length, 4);
        return out;
      })(),
    ],
  ])('refuses a frame with %s', (_what, raw) => {
    expect(() => decodeSessionFrame(raw)).toThrow(SessionFrameError);
  });
});
