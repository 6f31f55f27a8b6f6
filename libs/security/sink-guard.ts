import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { Agent, buildConnector } from 'undici';
import type { EventMeshConfig, SinkRange } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';

/** Resolves a host name to every address it has (the system resolver by default; tests inject their own). */
export type SinkResolver = (hostname: string) => Promise<{ address: string; family: number }[]>;

/** Why an address is refused: the range it is in. */
export type RefusedRange =
  'link-local' | 'cloud-metadata' | 'unspecified' | 'multicast' | 'reserved' | 'private' | 'loopback';

const systemResolver: SinkResolver = (hostname) => lookup(hostname, { all: true, verbatim: true });

/** Host names of cloud metadata services: refused before they are resolved. */
const METADATA_NAMES = new Set([
  'metadata.google.internal',
  'metadata.goog',
  'metadata',
  'instance-data',
  'instance-data.ec2.internal',
]);

/** Ranges a sink may never reach, whatever the configuration says. Checked in this order (metadata first). */
const ALWAYS: [RefusedRange, BlockList][] = [
  [
    'cloud-metadata',
    ranges([
      ['169.254.169.254', 32, 'ipv4'],
      ['100.100.100.200', 32, 'ipv4'],
      ['192.0.0.192', 32, 'ipv4'],
      ['fd00:ec2::254', 128, 'ipv6'],
    ]),
  ],
  [
    'link-local',
    ranges([
      ['169.254.0.0', 16, 'ipv4'],
      ['fe80::', 10, 'ipv6'],
    ]),
  ],
  [
    'unspecified',
    ranges([
      ['0.0.0.0', 8, 'ipv4'],
      ['::', 128, 'ipv6'],
    ]),
  ],
  [
    'multicast',
    ranges([
      ['224.0.0.0', 4, 'ipv4'],
      ['ff00::', 8, 'ipv6'],
    ]),
  ],
  // 240.0.0.0/4 holds the limited broadcast address 255.255.255.255; none of it is routable.
  ['reserved', ranges([['240.0.0.0', 4, 'ipv4']])],
];

/** Ranges a sink may reach only when EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES names them. */
const CONFIGURABLE: [RefusedRange & SinkRange, BlockList][] = [
  [
    'loopback',
    ranges([
      ['127.0.0.0', 8, 'ipv4'],
      ['::1', 128, 'ipv6'],
    ]),
  ],
  // RFC 1918, carrier-grade NAT (RFC 6598), unique local and the deprecated site-local IPv6 ranges.
  [
    'private',
    ranges([
      ['10.0.0.0', 8, 'ipv4'],
      ['172.16.0.0', 12, 'ipv4'],
      ['192.168.0.0', 16, 'ipv4'],
      ['100.64.0.0', 10, 'ipv4'],
      ['fc00::', 7, 'ipv6'],
      ['fec0::', 10, 'ipv6'],
    ]),
  ],
];

/** A sink the guard refuses: 400 `SINK_NOT_ALLOWED`, field `sink`. The message names the range, never the address. */
export class SinkNotAllowed extends EventMeshError {
  constructor(
    message: string,
    readonly range?: RefusedRange,
    reason?: 'userinfo' | 'own_publish_route',
  ) {
    super(ErrorCode.SinkNotAllowed, message, {
      field: 'sink',
      ...(range ? { range } : {}),
      ...(reason ? { reason } : {}),
    });
  }
}

/** The gateway's routes that write what they are sent into a topic: a sink there feeds its own events back in. */
export const PUBLISH_PATHS: readonly string[] = ['/events/publish', '/events/request', '/events/reply'];

/** Where this runtime serves its publish routes: its gateway's listen port and the URL it advertises. */
export interface OwnRoutes {
  port: number;
  /** EVENTMESH_INSTANCE_ADVERTISED_URL ('' when unset): the name other machines reach this instance by. */
  advertisedUrl: string;
}

/**
 * The SSRF guard of webhook sinks (docs/security.md). A sink's host is resolved once and EVERY address it has is
 * checked: link-local, cloud metadata, unspecified, multicast and reserved addresses are always refused; loopback
 * and private ranges unless EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES allows them; an IPv6 address that carries an
 * IPv4 one (mapped, compatible, NAT64, 6to4) is judged by the IPv4 address. {@link check} runs when a
 * subscription is created or replaced; {@link connector} at every connection a delivery or a handshake opens: it
 * resolves, checks and connects to the address it checked, so a name that resolves differently the second time
 * (DNS rebinding) cannot reach what the check refused. Redirects are never followed (undici `request` does not).
 */
export class SinkGuard {
  private readonly log = createLogger('SinkGuard');
  private readonly allowed: ReadonlySet<SinkRange>;

  constructor(
    allowedRanges: readonly SinkRange[],
    private readonly resolver: SinkResolver = systemResolver,
    /** This runtime's own publish routes, which no sink may point at; undefined: none known (a worker's guard). */
    private own?: OwnRoutes,
  ) {
    this.allowed = new Set(allowedRanges);
  }

  static fromConfig(config: EventMeshConfig, resolver?: SinkResolver): SinkGuard {
    return new SinkGuard(config.security.sinks.allowedRanges, resolver, {
      port: config.http.port,
      advertisedUrl: config.instance.advertisedUrl,
    });
  }

  /** The port the gateway listens on, once it does (EVENTMESH_HTTP_PORT=0 picks one at listen). */
  listeningOn(port: number): void {
    this.own = { advertisedUrl: '', ...this.own, port };
  }

  /** The range that refuses `address`, or undefined when a sink may reach it. */
  refusedRangeOf(address: string): RefusedRange | undefined {
    const ip = normalize(address);
    if (!ip) return 'reserved';
    for (const [range, list] of ALWAYS) if (list.check(ip.address, ip.type)) return range;
    for (const [range, list] of CONFIGURABLE)
      if (list.check(ip.address, ip.type) && !this.allowed.has(range)) return range;
    return undefined;
  }

  /** Checks a sink URL (create, replace): its scheme, and every address its host resolves to. Throws {@link SinkNotAllowed}. */
  async check(sink: string): Promise<void> {
    let url: URL;
    try {
      url = new URL(sink);
    } catch {
      throw new SinkNotAllowed('sink: not a URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new SinkNotAllowed('sink: only http and https sinks are allowed');
    // Credentials in a URL end up wherever the URL is shown (logs, the subscription's view, proxies' logs); the
    // message does not repeat them.
    if (url.username !== '' || url.password !== '') {
      throw new SinkNotAllowed(
        'sink: a sink URL may not carry a user name or password (user:password@host); send credentials some other way',
        undefined,
        'userinfo',
      );
    }
    const addresses = await this.checked(hostOf(url.hostname));
    if (this.isOwnPublishRoute(url, addresses)) {
      this.log.warn({ sink, port: this.own?.port }, "webhook sink refused: it is this runtime's own publish route");
      throw new SinkNotAllowed(
        "sink: the sink is this runtime's own publish route; every event delivered there would be published again, in a loop",
        undefined,
        'own_publish_route',
      );
    }
  }

  /**
   * Whether `url` is one of this runtime's publish routes: its path is a publish path, and either its host and
   * port are the advertised URL's, or its port is the gateway's and its host resolves to this machine (loopback,
   * or an address of one of its interfaces).
   */
  private isOwnPublishRoute(url: URL, addresses: readonly string[]): boolean {
    if (!this.own || !PUBLISH_PATHS.includes(url.pathname)) return false;
    const port = url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
    if (this.own.advertisedUrl !== '') {
      const advertised = new URL(this.own.advertisedUrl);
      if (advertised.protocol === url.protocol && advertised.host === url.host) return true;
    }
    if (port !== this.own.port) return false;
    const local = localAddresses();
    return addresses.some((address) => isThisMachine(address, local));
  }

  /**
   * Resolves `hostname` once and checks every address: the address to connect to (the first), or a
   * {@link SinkNotAllowed} when any address is refused or none is found.
   */
  async pin(hostname: string): Promise<string> {
    return (await this.checked(hostname))[0];
  }

  /** Every address `hostname` resolves to, each checked; a {@link SinkNotAllowed} when one is refused or none is found. */
  private async checked(hostname: string): Promise<string[]> {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    if (METADATA_NAMES.has(name)) return this.refuse(hostname, 'cloud-metadata');
    let addresses: { address: string }[];
    if (isIP(name)) addresses = [{ address: name }];
    else {
      try {
        addresses = await this.resolver(name);
      } catch (e) {
        throw new SinkNotAllowed(
          `sink: the host ${hostname} does not resolve (${(e as NodeJS.ErrnoException).code ?? 'no address'})`,
        );
      }
    }
    if (addresses.length === 0) throw new SinkNotAllowed(`sink: the host ${hostname} does not resolve`);
    for (const { address } of addresses) {
      const range = this.refusedRangeOf(address);
      if (range) return this.refuse(hostname, range, address);
    }
    return addresses.map((a) => a.address);
  }

  /**
   * An undici connector that pins every connection: the host is resolved and checked here, and `base` (undici's
   * own connector unless a test hands in a spy) connects to the checked address; TLS still verifies the sink's
   * name (undici takes the SNI name from the request's host, not from the address).
   */
  connector(base: buildConnector.connector = buildConnector({})): buildConnector.connector {
    return (options, callback) => {
      this.pin(options.hostname).then(
        (address) => base({ ...options, hostname: address }, callback),
        (e: Error) => callback(e, null),
      );
    };
  }

  /** An undici Agent whose every connection is pinned by this guard. */
  agent(options: Omit<Agent.Options, 'connect'> = {}, base?: buildConnector.connector): Agent {
    return new Agent({ ...options, connect: this.connector(base) });
  }

  private refuse(hostname: string, range: RefusedRange, address?: string): never {
    // The address goes to the log only: the caller learns the range, not what a name resolves to inside.
    this.log.warn({ host: hostname, address, range }, 'webhook sink refused');
    const allowable = range === 'loopback' || range === 'private';
    throw new SinkNotAllowed(
      `sink: the host ${hostname} resolves to a ${range} address, which webhook sinks may not reach` +
        (allowable ? ` unless EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES allows ${range}` : ''),
      range,
    );
  }
}

/** Loopback, where a sink's host is this machine whatever the interfaces say. */
const LOOPBACK = CONFIGURABLE.find(([range]) => range === 'loopback')![1];

/**
 * Whether `address` reaches this machine: loopback, or an address of one of its interfaces (or an unspecified one),
 * in whatever form (an IPv4-mapped IPv6 address as its IPv4 one).
 */
export function isThisMachine(address: string, local: ReadonlySet<string> = localAddresses()): boolean {
  const ip = normalize(address);
  return ip !== undefined && (LOOPBACK.check(ip.address, ip.type) || local.has(ip.address));
}

/** The addresses of this machine's interfaces (and the unspecified ones a sink could name to reach it). */
function localAddresses(): Set<string> {
  const local = new Set(['0.0.0.0', '::']);
  for (const list of Object.values(networkInterfaces()))
    for (const i of list ?? []) local.add(normalize(i.address)?.address ?? i.address);
  return local;
}

/** A URL's hostname without the brackets of an IPv6 literal. */
function hostOf(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/**
 * The address to judge: an IPv4 address, or an IPv6 one without its zone; an IPv6 address that embeds an IPv4
 * one (IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96, NAT64 64:ff9b::/96, 6to4 2002::/16) as that IPv4
 * address. Undefined when `address` is not an IP address.
 */
export function normalize(address: string): { address: string; type: 'ipv4' | 'ipv6' } | undefined {
  const bare = address.replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return { address: bare, type: 'ipv4' };
  if (family !== 6) return undefined;
  const words = expand(bare);
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zeros = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
  if (zeros(0, 5) && words[5] === 0xffff) return { address: v4(words[6], words[7]), type: 'ipv4' };
  if (zeros(0, 6) && (words[6] !== 0 || words[7] > 1)) return { address: v4(words[6], words[7]), type: 'ipv4' };
  if (words[0] === 0x64 && words[1] === 0xff9b && zeros(2, 6)) return { address: v4(words[6], words[7]), type: 'ipv4' };
  if (words[0] === 0x2002) return { address: v4(words[1], words[2]), type: 'ipv4' };
  return { address: bare, type: 'ipv6' };
}

/** The eight 16-bit words of an IPv6 address (which `isIP` accepted). */
function expand(address: string): number[] {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((w) => parseInt(w, 16)));
  const first = parse(head);
  if (tail === undefined) return first;
  const last = parse(tail);
  return [...first, ...new Array<number>(8 - first.length - last.length).fill(0), ...last];
}

function ranges(subnets: [string, number, 'ipv4' | 'ipv6'][]): BlockList {
  const list = new BlockList();
  for (const [network, prefix, type] of subnets) list.addSubnet(network, prefix, type);
  return list;
}
