/**
 * Where a tenant may aim a connection: one policy for every destination a tenant configures
 * (webhook URLs, the tenant's own SMTP server, any later channel), checked at configuration time
 * (the admin stores a URL) and at delivery time (the sender connects).
 *
 * Only public unicast addresses are reachable, unless the deployment's allow list names the
 * address range or the exact host name. A host name is resolved when the check runs and
 * refused if any of its addresses is forbidden; the check returns the address it approved and
 * the caller connects to exactly that one (`connectToApproved`), so a second lookup (DNS
 * rebinding) cannot swap in another.
 *
 * IPv6 spellings that embed an IPv4 address (IPv4-mapped, IPv4-compatible, IPv4-translated,
 * NAT64, 6to4, Teredo) are refused outright rather than decoded: decoding would have to know
 * each translator's layout (NAT64 prefixes may be network-specific, Teredo obfuscates its
 * client address), and a receiver with an IPv4 address publishes an A record, which is
 * checked as IPv4. An IPv6-only network behind DNS64 can allow `64:ff9b::/96` explicitly.
 */
import { promises as dns } from 'node:dns';
import net, { isIP } from 'node:net';
import tls from 'node:tls';
import ipaddr from 'ipaddr.js';
import { withinDeadline } from '../core/deadline.ts';
import { clip, type AttemptOutcome } from './channel.ts';

/** One answer of a name lookup. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export interface EgressPolicyOptions {
  /**
   * What the policy lets through although it is not public: CIDRs (`127.0.0.0/8`, `::1/128`),
   * single addresses, or exact host names (`hooks.corp.internal`, whose addresses are then
   * trusted). From config, for tests and on-premises receivers. Default: nothing.
   */
  allow?: readonly string[];
  /** Looks a host name up. Default: the system resolver, every address, in its order. */
  resolve?: (host: string) => Promise<ResolvedAddress[]>;
  /** A lookup slower than this is a failed lookup. Default 5000. */
  lookupTimeoutMs?: number;
}

/**
 * The policy's answer: the address to connect to, or why not. `host` is the URL's host as a
 * special URL spells it (lower case, IPv4 canonical, no brackets or trailing dots): the name TLS
 * verifies the certificate against.
 */
export type EgressVerdict =
  | { ok: true; address: string; family: 4 | 6; url: URL; host: string }
  | EgressRefusal;

/** `unresolved`: the host name did not resolve (or the lookup failed), so no address was checked. */
export type EgressRefusal = { ok: false; reason: string; unresolved?: true };

/** What a tenant may aim, and what its URLs may hold: the schemes, and whether credentials belong in them. */
const DESTINATIONS = {
  webhook: { schemes: ['http:', 'https:'], credentials: false },
  smtp: { schemes: ['smtp:', 'smtps:'], credentials: true },
} as const;
/** A kind of destination a tenant aims: `webhook` or `smtp`. */
export type Destination = keyof typeof DESTINATIONS;

/** What `relay.allowPrivateWebhooks` lets through, for every destination: loopback and the private ranges. */
export const LOOPBACK_AND_PRIVATE_NETWORKS: readonly string[] = [
  '127.0.0.0/8', '::1/128', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7',
];

const DEFAULT_LOOKUP_TIMEOUT_MS = 5000;

/** ipaddr.js range names, as a refusal says them. */
const RANGE_WORDS: Record<string, string> = {
  unspecified: 'an unspecified',
  broadcast: 'a broadcast',
  multicast: 'a multicast',
  linkLocal: 'a link-local',
  loopback: 'a loopback',
  carrierGradeNat: 'a carrier-grade NAT',
  private: 'a private',
  reserved: 'a reserved',
  uniqueLocal: 'a unique-local',
  deprecatedSiteLocal: 'a site-local',
  ipv4Mapped: 'an IPv4-mapped',
  rfc6145: 'an IPv4-translated',
  rfc6052: 'a NAT64',
  '6to4': 'a 6to4',
  teredo: 'a Teredo',
};

// Not named by ipaddr.js: ::/96 (IPv4-compatible, so [::127.0.0.1] is ::7f00:1 and would pass as
// unicast). Beyond it, anything outside 2000::/3 is not allocated global unicast.
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * Why an address is not reachable (`"a loopback address"`), or undefined for a public unicast
 * one. Only canonical spellings count as addresses (net.isIP): anything else is refused, so
 * ipaddr.js's lenient parser (`127.1`, octal) can never disagree with what a socket would do.
 */
function forbiddenKind(ip: string): string | undefined {
  if (isIP(ip) === 0 || ip.includes('%')) return 'not a plain IP address';
  const parsed = ipaddr.parse(ip);
  const range = parsed.range();
  if (range !== 'unicast') return `${RANGE_WORDS[range] ?? `a ${range}`} address`;
  if (parsed.kind() === 'ipv6') {
    if (parsed.match(IPV4_COMPATIBLE)) return 'an IPv4-compatible address';
    if (!parsed.match(GLOBAL_UNICAST_V6)) return 'not a global unicast address';
  }
  return undefined;
}

/** Whether a tenant's destination may not be this IP address: anything but a public unicast address. */
export function isForbiddenAddress(ip: string): boolean {
  return forbiddenKind(ip) !== undefined;
}

/** A host name as compared and looked up: lower case, without brackets or trailing dots. */
function normaliseHost(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, '').replace(/\.+$/, '').toLowerCase();
}

/**
 * The host as an http URL would read it, normalised; undefined when it cannot be read so. An
 * smtp: URL's host is opaque to WHATWG URL (`2130706433`, `0x7f.1`, `%31%32%37.0.0.1` stay as
 * written) while the system resolver reads such a name as 127.0.0.1: read as http, every
 * spelling of an address is that address, and is checked as one.
 */
function specialHost(hostname: string): string | undefined {
  if (hostname === '') return '';
  try {
    return normaliseHost(new URL(`http://${hostname}/`).hostname);
  } catch {
    return undefined;
  }
}

function systemResolve(host: string): Promise<ResolvedAddress[]> {
  return dns.lookup(host, { all: true, verbatim: true }) as Promise<ResolvedAddress[]>;
}

/** The deployment's egress rule, with its allow list parsed once (a bad entry throws at start-up). */
export class EgressPolicy {
  private readonly networks: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> = [];
  private readonly hosts = new Set<string>();
  private readonly resolve: (host: string) => Promise<ResolvedAddress[]>;
  private readonly lookupTimeoutMs: number;

  constructor(options: EgressPolicyOptions = {}) {
    for (const entry of options.allow ?? []) {
      if (entry.includes('/')) {
        if (!ipaddr.isValidCIDR(entry)) throw new Error(`egress allow list: ${entry} is not a CIDR`);
        this.networks.push(ipaddr.parseCIDR(entry));
      } else if (isIP(entry) !== 0) {
        const address = ipaddr.parse(entry);
        this.networks.push([address, address.kind() === 'ipv4' ? 32 : 128]);
      } else {
        const host = normaliseHost(entry);
        if (!/^[a-z0-9.-]+$/.test(host)) throw new Error(`egress allow list: ${entry} is neither a CIDR nor a host name`);
        this.hosts.add(host);
      }
    }
    this.resolve = options.resolve ?? systemResolve;
    this.lookupTimeoutMs = options.lookupTimeoutMs ?? DEFAULT_LOOKUP_TIMEOUT_MS;
  }

  /**
   * Decides whether a connection to `url`, a `destination` of that kind, may go out now, and to
   * which address. The host name is looked up on every call; a failed lookup is a refusal
   * (marked `unresolved`).
   */
  async check(url: string, destination: Destination): Promise<EgressVerdict> {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return { ok: false, reason: 'not a URL' };
    }
    const { schemes, credentials } = DESTINATIONS[destination];
    if (!(schemes as readonly string[]).includes(parsed.protocol)) {
      return { ok: false, reason: `${parsed.protocol} is not ${schemes.map((scheme) => scheme.slice(0, -1)).join(' or ')}` };
    }
    if (!credentials && (parsed.username || parsed.password)) return { ok: false, reason: 'the URL carries credentials' };
    const host = specialHost(parsed.hostname);
    if (host === undefined) return { ok: false, reason: 'the URL\'s host is not a host name or an address' };
    if (host === '') return { ok: false, reason: 'the URL has no host' };

    const family = isIP(host);
    if (family !== 0) {
      const kind = this.refusal(host);
      return kind ? { ok: false, reason: `${host} is ${kind}` } : { ok: true, address: host, family: family as 4 | 6, url: parsed, host };
    }
    const trustedName = this.hosts.has(host);
    if (!trustedName && (host === 'localhost' || host.endsWith('.localhost'))) return { ok: false, reason: `${host} names this machine` };

    const lookup = await this.lookup(host);
    if ('failure' in lookup) return { ok: false, reason: `lookup of ${host} failed: ${lookup.failure}`, unresolved: true };
    // Every answer, not only the first: another caller (or a retry) may be given another one.
    for (const { address } of lookup.addresses) {
      const kind = isIP(address) === 0 ? 'not a plain IP address' : trustedName ? undefined : this.refusal(address);
      if (kind) return { ok: false, reason: `${host} resolves to ${address}, ${kind}` };
    }
    const address = lookup.addresses[0]!.address;
    return { ok: true, address, family: isIP(address) as 4 | 6, url: parsed, host };
  }

  /**
   * The configuration-time check of a destination's URL: every refusal of `check` except a
   * failed lookup. A name that does not resolve yet is stored; delivery checks again before
   * every connection and refuses then (fail-closed where it matters: nothing ever connects to
   * an unchecked address).
   */
  async checkConfiguredUrl(url: string, destination: Destination): Promise<{ ok: true } | { ok: false; reason: string }> {
    const verdict = await this.check(url, destination);
    return verdict.ok || verdict.unresolved ? { ok: true } : { ok: false, reason: verdict.reason };
  }

  /** Why `address` may not be reached (`"a private address"`), unless the allow list names it. */
  private refusal(address: string): string | undefined {
    const kind = forbiddenKind(address);
    return kind === undefined || this.allowed(address) ? undefined : kind;
  }

  private allowed(address: string): boolean {
    if (isIP(address) === 0 || address.includes('%')) return false;
    const parsed = ipaddr.parse(address);
    return this.networks.some((network) => network[0].kind() === parsed.kind() && parsed.match(network));
  }

  private lookup(host: string): Promise<{ addresses: ResolvedAddress[] } | { failure: string }> {
    const answer = Promise.resolve(host).then(this.resolve).then(
      (addresses) => (addresses.length > 0 ? { addresses } : { failure: 'no addresses' }),
      (error: NodeJS.ErrnoException) => ({ failure: error.code ?? error.message }),
    );
    return withinDeadline(answer, this.lookupTimeoutMs, () => ({ failure: `no answer within ${this.lookupTimeoutMs} ms` }));
  }
}

/** Where a sender opens its socket: the address the policy approved, and for TLS the host name to verify. */
export interface ConnectOptions {
  /** The IP address the egress policy approved. */
  host: string;
  port: number;
  /** TLS only: the URL's host name, for SNI and the certificate check (absent for an IP literal). */
  servername?: string;
  /** Whether the socket is TLS from the start (https); SMTP upgrades a plain one itself. */
  tls: boolean;
}

/** The default connector: net.connect, or tls.connect (which verifies the certificate), to the approved address. */
export function connectToApproved({ host, port, servername, tls: secure }: ConnectOptions): net.Socket {
  return secure ? tls.connect({ host, port, ...(servername ? { servername } : {}) }) : net.connect({ host, port });
}

/** The attempt's outcome when the policy said no: a failed lookup may pass later (transient), a refused address will not. */
export function refusedOutcome(refusal: EgressRefusal): AttemptOutcome {
  return refusal.unresolved
    ? { kind: 'transient', error: clip(`not sent: ${refusal.reason}`), providerStatus: 'unresolved' }
    : { kind: 'permanent', error: clip(`refused by the egress policy: ${refusal.reason}`), providerStatus: 'refused' };
}
