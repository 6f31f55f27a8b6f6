import type { EventMeshConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { isThisMachine, normalizeAddress, SinkGuard, SinkNotAllowed, type SinkResolver } from '@libs/security';

/**
 * The address rules of a job's targets: the sink rules of the event runtime (SinkGuard: metadata, link-local and
 * reserved addresses always refused, loopback and private ranges only when EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES
 * allows them), and never the runtime's own database (where the connector runtime's schema lives too), whatever
 * name or address form reaches it: the addresses are compared as {@link normalizeAddress} writes them (an
 * IPv4-mapped IPv6 address as its IPv4 one), and when the runtime's database is on this machine, any address of
 * this machine is it (loopback, an interface's address). Resolved once; the job connects to the address checked.
 */
export class TargetGuard {
  private readonly sinks: SinkGuard;

  constructor(
    private readonly shared: EventMeshConfig,
    private readonly resolver: SinkResolver = (host) => lookupAll(host),
  ) {
    this.sinks = new SinkGuard(shared.security.sinks.allowedRanges, resolver);
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
      const ownAddresses = (await this.addressesOf(own.host)).map(comparable);
      const target = comparable(address);
      if (ownAddresses.includes(target) || (isThisMachine(target) && ownAddresses.some((a) => isThisMachine(a))))
        throw refused("the event runtime's own database is not a job's to read or write", { reason: 'own_database' });
    }
    return address;
  }

  private async addressesOf(host: string): Promise<string[]> {
    if (normalizeAddress(host)) return [host];
    return (await this.resolver(host)).map((a) => a.address);
  }
}

async function lookupAll(host: string): Promise<{ address: string; family: number }[]> {
  const { lookup } = await import('node:dns/promises');
  return lookup(host, { all: true, verbatim: true });
}

/** An address as comparable text: an IPv4-mapped (or otherwise embedded) IPv4 address as that IPv4 address. */
function comparable(address: string): string {
  return normalizeAddress(address)?.address ?? address;
}

function refused(message: string, details: Record<string, unknown>): EventMeshError {
  return new EventMeshError(ErrorCode.SinkNotAllowed, `config.connection.host: ${message}`, {
    field: 'config.connection.host',
    ...details,
  });
}
