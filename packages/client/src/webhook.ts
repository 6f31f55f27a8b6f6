import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HTTP, type CloudEvent } from 'cloudevents';
import type { DedupeStore } from './dedupe/dedupe-store';
import { MemoryDedupeStore } from './dedupe/memory-dedupe-store';

export interface WebhookReceiverOptions {
  /**
   * The subscription's signing secret (`whsec_...`, from the create's answer), several during a rotation, or a
   * callback giving them (the receiver must answer the validation handshake before the create returns the secret).
   */
  secret: string | string[] | (() => string | string[]);
  /** Called per event; resolving answers 2xx. A throw answers 500: the runtime retries, then dead-letters. */
  handler: (event: CloudEvent<unknown>) => Promise<void> | void;
  /** How far `webhook-timestamp` may be from this clock, either way (default 300 s). */
  toleranceSeconds?: number;
  /** Origins the validation handshake allows (default any: `*`). */
  allowedOrigins?: string[];
  /** Where handled events are remembered by (source, id): default a `MemoryDedupeStore`; `false` turns it off. */
  dedupe?: DedupeStore | false;
  /**
   * The largest body taken (default 4 MiB: the runtime's batches are at most 1 MiB, an event in binary mode at most
   * the instance's `EVENTMESH_HTTP_BODY_LIMIT_BYTES`, 1 MiB by default); a larger one is answered 413 unread.
   */
  maxBodyBytes?: number;
}

/** One request as the receiver sees it, whatever the server. */
export interface WebhookRequest {
  method: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface WebhookAnswer {
  status: number;
  headers: Record<string, string>;
  body?: string;
}

/** A webhook receiver: the core (`receive`), a Node `http` listener and a Fastify plugin. */
export interface WebhookReceiver {
  /** Verifies, answers the handshake, parses, dedupes and calls the handler; never throws. */
  receive(req: WebhookRequest): Promise<WebhookAnswer>;
  /** A listener for `http.createServer`. */
  node(req: IncomingMessage, res: ServerResponse): void;
  /** A Fastify plugin (`app.register(receiver.fastify, { path: '/hook' })`): takes the raw body for the signature. */
  fastify: FastifyPlugin;
  /** Events handled, and duplicates answered without calling the handler. */
  readonly stats: { handled: number; duplicates: number; refused: number };
}

/** The part of Fastify the plugin uses, so the SDK does not depend on Fastify. */
interface FastifyLike {
  removeAllContentTypeParsers(): void;
  addContentTypeParser(
    type: string,
    options: { parseAs: 'buffer'; bodyLimit: number },
    parser: (req: unknown, body: Buffer, done: (e: Error | null, body?: Buffer) => void) => void,
  ): void;
  route(route: {
    method: string[];
    url: string;
    handler: (
      req: { method: string; headers: WebhookRequest['headers']; body?: unknown },
      reply: FastifyReplyLike,
    ) => Promise<void>;
  }): void;
}
interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  headers(h: Record<string, string>): FastifyReplyLike;
  send(body?: string): unknown;
}
type FastifyPlugin = (app: FastifyLike, opts: { path?: string }) => Promise<void>;

const header = (h: WebhookRequest['headers'], name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

/** The default {@link WebhookReceiverOptions.maxBodyBytes}. */
const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

/** A refusal, with the machine-readable body every refusal has: `{ code, message }`. */
class Refusal {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly message: string,
  ) {}
}

/**
 * Receives a webhook subscription's deliveries: the CloudEvents webhook validation handshake (`OPTIONS` with
 * `WebHook-Request-Origin`), Standard Webhooks signatures (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature`: HMAC-SHA256 of `id.timestamp.body`) within the timestamp tolerance, events in the binary,
 * structured or batch mode, each validated, and dedupe by (source, id) recorded after the handler succeeded. Every
 * answer but a 2xx carries `{ code, message }` as JSON.
 */
export function webhookReceiver(options: WebhookReceiverOptions): WebhookReceiver {
  const tolerance = options.toleranceSeconds ?? 300;
  if (!Number.isFinite(tolerance) || tolerance < 0)
    throw new TypeError(`toleranceSeconds must be a finite number of seconds >= 0, not ${tolerance}`);
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 1)
    throw new TypeError(`maxBodyBytes must be a whole number of bytes >= 1, not ${maxBodyBytes}`);
  // A static secret that is no key is a mistake to say at once; a callback's is refused per request.
  if (typeof options.secret !== 'function') keysOf(options.secret);
  const dedupe = options.dedupe === false ? undefined : (options.dedupe ?? new MemoryDedupeStore());
  const stats = { handled: 0, duplicates: 0, refused: 0 };
  const answerOf = (r: Refusal): WebhookAnswer => {
    if (r.status < 500) stats.refused++;
    return {
      status: r.status,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code: r.code, message: r.message }),
    };
  };

  async function receive(req: WebhookRequest): Promise<WebhookAnswer> {
    try {
      return await receiveOrRefuse({ ...req, headers: lowerCased(req.headers) });
    } catch (e) {
      if (e instanceof Refusal) return answerOf(e);
      return answerOf(new Refusal(500, 'RECEIVER_FAILED', messageOf(e)));
    }
  }

  async function receiveOrRefuse(req: WebhookRequest): Promise<WebhookAnswer> {
    if (req.method === 'OPTIONS') return handshake(req, options.allowedOrigins);
    if (req.method !== 'POST') throw new Refusal(405, 'METHOD_NOT_ALLOWED', 'POST or OPTIONS');
    if (req.body.length > maxBodyBytes)
      throw new Refusal(413, 'BODY_TOO_LARGE', `the body is larger than maxBodyBytes (${maxBodyBytes})`);
    let keys: Buffer[];
    try {
      keys = keysOf(typeof options.secret === 'function' ? options.secret() : options.secret);
    } catch (e) {
      throw new Refusal(503, 'NO_SECRET', `no signing secret to verify with: ${messageOf(e)}`);
    }
    const problem = checkSignature(req, keys, tolerance, Date.now());
    if (problem) throw new Refusal(401, problem.code, problem.message);
    const events = parseEvents(req);
    try {
      for (const event of events) {
        if (dedupe && (await dedupe.seen(event.source, event.id))) {
          stats.duplicates++;
          continue;
        }
        await options.handler(event);
        stats.handled++;
        await dedupe?.record(event.source, event.id);
      }
    } catch (e) {
      throw new Refusal(500, 'HANDLER_FAILED', messageOf(e));
    }
    return { status: 204, headers: {} };
  }

  const node = (req: IncomingMessage, res: ServerResponse): void => {
    const answer = (a: WebhookAnswer) => {
      if (!res.headersSent) res.writeHead(a.status, a.headers).end(a.body);
    };
    const declared = Number(req.headers['content-length']);
    if (declared > maxBodyBytes) {
      // Answered unread; the connection closes after the answer rather than reading the body through.
      res.setHeader('connection', 'close');
      answer(answerOf(new Refusal(413, 'BODY_TOO_LARGE', `the body is larger than maxBodyBytes (${maxBodyBytes})`)));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBodyBytes) {
        res.setHeader('connection', 'close');
        answer(answerOf(new Refusal(413, 'BODY_TOO_LARGE', `the body is larger than maxBodyBytes (${maxBodyBytes})`)));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('error', () => undefined);
    req.on('end', () => {
      void receive({ method: req.method ?? 'GET', headers: req.headers, body: Buffer.concat(chunks) }).then(answer);
    });
  };

  const fastify: FastifyPlugin = async (app, opts) => {
    // Inside the plugin only (it is encapsulated): every body as its bytes, which the signature is over; Fastify's
    // own JSON and text parsers would hand on a parsed or decoded body.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: maxBodyBytes }, (_req, body, done) =>
      done(null, body),
    );
    app.route({
      method: ['POST', 'OPTIONS'],
      url: opts.path ?? '/',
      handler: async (req, reply) => {
        const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const a = await receive({ method: req.method, headers: req.headers, body });
        await reply.code(a.status).headers(a.headers).send(a.body);
      },
    });
  };

  return { receive, node, fastify, stats };
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function lowerCased(headers: WebhookRequest['headers']): WebhookRequest['headers'] {
  const out: WebhookRequest['headers'] = {};
  for (const [name, value] of Object.entries(headers)) out[name.toLowerCase()] = value;
  return out;
}

/**
 * The request's events, each valid, with binary data as bytes: in binary mode the `ce-*` headers percent-decoded
 * (the HTTP binding encodes space, `"`, `%` and non-ASCII) and a body that is not text or JSON handed on as its
 * bytes; structured and batch mode whatever the case or parameters of their media type. 400 otherwise.
 */
function parseEvents(req: WebhookRequest): CloudEvent<unknown>[] {
  const contentType = header(req.headers, 'content-type') ?? '';
  const media = contentType.split(';')[0].trim().toLowerCase();
  const headers: Record<string, string> = {};
  const structured = media === 'application/cloudevents+json' || media === 'application/cloudevents-batch+json';
  let body: string | Buffer | undefined;
  try {
    for (const [name, value] of Object.entries(req.headers)) {
      const v = Array.isArray(value) ? value[0] : value;
      if (v === undefined) continue;
      headers[name] = !structured && name.startsWith('ce-') ? decodeURIComponent(v) : v;
    }
  } catch {
    throw new Refusal(400, 'INVALID_CLOUDEVENT', 'a ce-* header is not percent-encoded as the HTTP binding asks');
  }
  if (structured) {
    headers['content-type'] = media;
    body = req.body.toString('utf8');
  } else if (req.body.length === 0) body = undefined;
  else body = isText(media, contentType) ? req.body.toString('utf8') : req.body;
  let events: CloudEvent<unknown>[];
  try {
    const parsed = HTTP.toEvent({ headers, body });
    events = (Array.isArray(parsed) ? parsed : [parsed]) as CloudEvent<unknown>[];
  } catch (e) {
    throw new Refusal(400, 'INVALID_CLOUDEVENT', messageOf(e));
  }
  return events.map((event, i) => {
    try {
      event.validate();
    } catch (e) {
      const errors = (e as { errors?: { message?: string }[] }).errors;
      const why = errors?.map((x) => x.message).join('; ') || messageOf(e);
      throw new Refusal(400, 'INVALID_CLOUDEVENT', events.length > 1 ? `event ${i}: ${why}` : why);
    }
    // The cloudevents library reads `data_base64` into a Uint32Array of the bytes; a Uint8Array is what they are.
    return event.data instanceof Uint32Array
      ? (event.cloneWith({ data: Uint8Array.from(event.data) }, false) as CloudEvent<unknown>)
      : event;
  });
}

/** Whether a binary-mode body is text: JSON, XML, `text/*` or any type with a charset. */
function isText(media: string, contentType: string): boolean {
  return (
    media.startsWith('text/') ||
    /^application\/([\w.+-]+\+)?(json|xml)$/.test(media) ||
    /;\s*charset=/i.test(contentType)
  );
}

/** The CloudEvents webhook validation handshake: allow the requesting origin if it is one allowed. */
function handshake(req: WebhookRequest, allowed: string[] | undefined): WebhookAnswer {
  const origin = header(req.headers, 'webhook-request-origin');
  if (!origin) throw new Refusal(400, 'MISSING_ORIGIN', 'WebHook-Request-Origin is missing');
  if (allowed && !allowed.includes(origin))
    throw new Refusal(403, 'ORIGIN_NOT_ALLOWED', `origin ${origin} is not one of allowedOrigins`);
  return {
    status: 200,
    headers: { 'webhook-allowed-origin': origin, 'webhook-allowed-rate': '*', allow: 'POST, OPTIONS' },
  };
}

/**
 * The HMAC keys of the secrets given (`whsec_` then base64, or base64 alone, as the runtime makes them); throws when
 * there is none, or one is empty: an empty key is one anybody can sign with.
 */
function keysOf(secret: string | string[] | undefined): Buffer[] {
  const secrets = (Array.isArray(secret) ? secret : [secret]).filter((s) => s !== undefined && s !== null);
  if (secrets.length === 0) throw new TypeError('secret is missing');
  return secrets.map((s, i) => {
    if (typeof s !== 'string') throw new TypeError(`secret ${i} is not a string`);
    const key = Buffer.from(s.replace(/^whsec_/, ''), 'base64');
    if (key.length === 0) throw new TypeError(`secret ${i} is empty`);
    return key;
  });
}

/** Why the Standard Webhooks signature does not hold (undefined when it does); `secrets` as the runtime gives them. */
export function verifySignature(
  req: WebhookRequest,
  secrets: string[],
  toleranceSeconds: number,
  now = Date.now(),
): string | undefined {
  let keys: Buffer[];
  try {
    keys = keysOf(secrets);
  } catch (e) {
    return messageOf(e);
  }
  return checkSignature({ ...req, headers: lowerCased(req.headers) }, keys, toleranceSeconds, now)?.message;
}

function checkSignature(
  req: WebhookRequest,
  keys: Buffer[],
  toleranceSeconds: number,
  now: number,
): { code: string; message: string } | undefined {
  const id = header(req.headers, 'webhook-id');
  const timestamp = header(req.headers, 'webhook-timestamp');
  const signatures = header(req.headers, 'webhook-signature');
  if (!id || !timestamp || !signatures)
    return { code: 'MISSING_SIGNATURE', message: 'webhook-id, webhook-timestamp and webhook-signature are required' };
  if (!/^\d+$/.test(timestamp) || !(Math.abs(now / 1000 - Number(timestamp)) <= toleranceSeconds))
    return { code: 'STALE_TIMESTAMP', message: `webhook-timestamp is more than ${toleranceSeconds} s from this clock` };
  const given = signatures.split(' ').flatMap((s) => (s.startsWith('v1,') ? [Buffer.from(s.slice(3), 'base64')] : []));
  for (const key of keys) {
    const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(req.body).digest();
    if (given.some((g) => g.length === expected.length && timingSafeEqual(g, expected))) return undefined;
  }
  return { code: 'BAD_SIGNATURE', message: 'no signature matches' };
}
