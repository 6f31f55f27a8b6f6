import type { EventMeshConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { SinkGuard, SinkNotAllowed } from '@libs/security';

/**
 * The address rules of a job's targets: the sink rules of the event runtime (SinkGuard: metadata, link-local and
 * reserved addresses always refused, loopback and private ranges only when EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES
 * allows them), and never the runtime's own database (where the connector runtime's schema lives too), whatever
 * name reaches it. Resolved once; the job connects to the address checked.
 */
export class TargetGuard {
  private readonly sinks: SinkGuard;

  constructor(private readonly shared: EventMeshConfig) {
    this.sinks = new SinkGuard(shared.security.sinks.allowedRanges);
  }

  /** The address to connect to; a 400 `SINK_NOT_ALLOWED` naming `config.connection.host` when refused. */
  async pinHost(host: string, port: number, database: string): Promise<string> {
    let address: string;
    try {
      address = await this.sinks.pin(host);
    } catch (e) {
      if (e instanceof SinkNotAllowed) throw refused(e.message.replace(/^sink: /, ''), { range: e.range });
      throw e;
    }
    const own = this.shared.postgres;
    if (port === own.port && database === own.database) {
      const ownAddresses = await this.addressesOf(own.host);
      if (ownAddresses.includes(address) || (isLoopback(address) && ownAddresses.some(isLoopback)))
        throw refused("the event runtime's own database is not a job's to read or write", { reason: 'own_database' });
    }
    return address;
  }

  private async addressesOf(host: string): Promise<string[]> {
    const { lookup } = await import('node:dns/promises');
    return (await lookup(host, { all: true })).map((a) => a.address);
  }
}

function isLoopback(address: string): boolean {
  return address === '::1' || address.startsWith('127.') || address === 'localhost';
}

function refused(message: string, details: Record<string, unknown>): EventMeshError {
  return new EventMeshError(ErrorCode.SinkNotAllowed, `config.connection.host: ${message}`, {
    field: 'config.connection.host',
    ...details,
  });
}
