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
  addContentTypeParser(
    type: string,
    options: { parseAs: 'buffer' },
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

/**
 * Receives a webhook subscription's deliveries: the CloudEvents webhook validation handshake (`OPTIONS` with
 * `WebHook-Request-Origin`), Standard Webhooks signatures (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature`: HMAC-SHA256 of `id.timestamp.body`) within the timestamp tolerance, events in the binary,
 * structured or batch mode, and dedupe by (source, id) recorded after the handler succeeded.
 */
export function webhookReceiver(options: WebhookReceiverOptions): WebhookReceiver {
  const dedupe = options.dedupe === false ? undefined : (options.dedupe ?? new MemoryDedupeStore());
  const stats = { handled: 0, duplicates: 0, refused: 0 };
  const refuse = (status: number, code: string, message: string): WebhookAnswer => {
    stats.refused++;
    return { status, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code, message }) };
  };

  async function receive(req: WebhookRequest): Promise<WebhookAnswer> {
    if (req.method === 'OPTIONS') return handshake(req, options.allowedOrigins);
    if (req.method !== 'POST') return refuse(405, 'METHOD_NOT_ALLOWED', 'POST or OPTIONS');
    const problem = verifySignature(req, secretsOf(options.secret), options.toleranceSeconds ?? 300);
    if (problem) return refuse(401, 'BAD_SIGNATURE', problem);
    let events: CloudEvent<unknown>[];
    try {
      const parsed = HTTP.toEvent({ headers: req.headers as Record<string, string>, body: req.body.toString('utf8') });
      events = (Array.isArray(parsed) ? parsed : [parsed]) as CloudEvent<unknown>[];
    } catch (e) {
      return refuse(400, 'INVALID_CLOUDEVENT', (e as Error).message);
    }
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
      return {
        status: 500,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ code: 'HANDLER_FAILED', message: (e as Error).message }),
      };
    }
    return { status: 204, headers: {} };
  }

  const node = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void receive({ method: req.method ?? 'GET', headers: req.headers, body: Buffer.concat(chunks) }).then((a) =>
        res.writeHead(a.status, a.headers).end(a.body),
      );
    });
  };

  const fastify: FastifyPlugin = async (app, opts) => {
    for (const type of [
      'application/json',
      'application/cloudevents+json',
      'application/cloudevents-batch+json',
      '*',
    ]) {
      app.addContentTypeParser(type, { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
    }
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

/** The CloudEvents webhook validation handshake: allow the requesting origin if it is one allowed. */
function handshake(req: WebhookRequest, allowed: string[] | undefined): WebhookAnswer {
  const origin = header(req.headers, 'webhook-request-origin');
  if (!origin) return { status: 400, headers: {}, body: 'WebHook-Request-Origin is missing' };
  if (allowed && !allowed.includes(origin)) return { status: 403, headers: {} };
  return {
    status: 200,
    headers: { 'webhook-allowed-origin': origin, 'webhook-allowed-rate': '*', allow: 'POST, OPTIONS' },
  };
}

function secretsOf(secret: WebhookReceiverOptions['secret']): string[] {
  const value = typeof secret === 'function' ? secret() : secret;
  return Array.isArray(value) ? value : [value];
}

/** Why the Standard Webhooks signature does not hold (undefined when it does). */
export function verifySignature(
  req: WebhookRequest,
  secrets: string[],
  toleranceSeconds: number,
  now = Date.now(),
): string | undefined {
  const id = header(req.headers, 'webhook-id');
  const timestamp = header(req.headers, 'webhook-timestamp');
  const signatures = header(req.headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) return 'webhook-id, webhook-timestamp and webhook-signature are required';
  if (!/^\d+$/.test(timestamp) || Math.abs(now / 1000 - Number(timestamp)) > toleranceSeconds)
    return 'webhook-timestamp is outside the tolerance';
  const given = signatures.split(' ').flatMap((s) => (s.startsWith('v1,') ? [Buffer.from(s.slice(3), 'base64')] : []));
  for (const secret of secrets) {
    const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
    const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(req.body).digest();
    if (given.some((g) => g.length === expected.length && timingSafeEqual(g, expected))) return undefined;
  }
  return 'no signature matches';
}
