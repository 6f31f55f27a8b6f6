import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { EventMeshConfig } from '@libs/config';
import { ErrorCode } from '@libs/errors';
import { GateRefusal } from '@libs/security';

const CHALLENGE = { 'www-authenticate': 'Bearer realm="metrics"' };

/**
 * Who may scrape `GET /metrics` besides what its gate says, and what a scrape shows (docs/operations.md#metrics).
 * With EVENTMESH_METRICS_SCRAPE_SECRET set, a scrape must carry `Authorization: Bearer <secret>`: a credential that
 * reads metrics and opens nothing else, so Prometheus holds no admin token. While either gate is on, the samples
 * labelled with subscription ids (which are tenants') are left out unless EVENTMESH_METRICS_SUBSCRIPTION_LABELS
 * says the operator wants them.
 */
export class MetricsAccess {
  private readonly secret?: Buffer;

  constructor(
    secret: string,
    readonly subscriptionLabels: boolean,
  ) {
    if (secret !== '') this.secret = digest(secret);
  }

  /** `gated`: either gate of the instance is on (not open). */
  static fromConfig(config: EventMeshConfig, gated: boolean): MetricsAccess {
    return new MetricsAccess(config.metrics.scrapeSecret, config.metrics.subscriptionLabels || !gated);
  }

  /** Throws 401 `UNAUTHENTICATED` when a scrape secret is configured and the request does not carry it. */
  check(headers: IncomingHttpHeaders): void {
    if (!this.secret) return;
    const sent = /^Bearer ([^\s]+)$/i.exec(headers.authorization ?? '')?.[1];
    // Digests of equal length: the comparison's time tells nothing of the secret.
    if (sent !== undefined && timingSafeEqual(digest(sent), this.secret)) return;
    throw new GateRefusal(
      ErrorCode.Unauthenticated,
      'GET /metrics needs Authorization: Bearer <EVENTMESH_METRICS_SCRAPE_SECRET>',
      'scrape_secret',
      CHALLENGE,
    );
  }
}

const digest = (value: string) => createHash('sha256').update(value).digest();
