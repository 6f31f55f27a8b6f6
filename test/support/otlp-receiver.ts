import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as an OTLP/HTTP JSON export carries it, with its resource's attributes beside it. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status?: { code?: number; message?: string };
  resource: Record<string, unknown>;
}

interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
}

interface OtlpExport {
  resourceSpans?: {
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: { spans?: (Omit<ReceivedSpan, 'attributes' | 'resource'> & { attributes?: OtlpAttribute[] })[] }[];
  }[];
}

const attributesOf = (list: OtlpAttribute[] | undefined): Record<string, unknown> =>
  Object.fromEntries(
    (list ?? []).map(({ key, value }) => [
      key,
      value.stringValue ??
        (value.intValue !== undefined ? Number(value.intValue) : (value.boolValue ?? value.doubleValue)),
    ]),
  );

/**
 * An OTLP/HTTP trace collector on a free loopback port: it takes `POST /v1/traces` JSON bodies (what
 * @opentelemetry/exporter-trace-otlp-http sends), answers 200, and keeps every span. Anything else is a 404.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Bodies it could not read (kept, so a test can say why it found nothing). */
  readonly unreadable: string[] = [];
  private server?: Server;
  url?: string;

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/v1/traces') return void res.writeHead(404).end();
        const body = Buffer.concat(chunks).toString('utf8');
        try {
          const exported = JSON.parse(body) as OtlpExport;
          for (const rs of exported.resourceSpans ?? []) {
            const resource = attributesOf(rs.resource?.attributes);
            for (const ss of rs.scopeSpans ?? []) {
              for (const span of ss.spans ?? [])
                this.spans.push({ ...span, attributes: attributesOf(span.attributes), resource });
            }
          }
        } catch {
          this.unreadable.push(body.slice(0, 200));
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return (this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`);
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
