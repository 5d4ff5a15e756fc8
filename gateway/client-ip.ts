/**
 * The client IP that rate limits apply to. X-Forwarded-For is honoured only when the peer is a
 * configured proxy; then the client is the right-most address that is not itself a trusted
 * proxy (addresses left of it are whatever the client chose to send).
 *
 * Limits count per client network, not per address: one IPv6 host is given a whole /64 (often
 * more), so an address of its own per request would pass any per-address limit. `ClientLimiter`
 * keys every per-client limiter by `limitKey`: an IPv4 address itself, an IPv6 address's
 * network of SLUICE_IPV6_LIMIT_PREFIX bits (64 by default).
 */
import { BlockList, isIP, SocketAddress } from 'node:net';
import type { LimitDecision, Limiter } from './limiter.ts';

export type ClientIpResolver = (remoteAddress: string, forwardedFor: string | undefined) => string;

function normalise(address: string): string {
  // IPv4-mapped IPv6 (::ffff:1.2.3.4) is the IPv4 client.
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

function family(address: string): 'ipv4' | 'ipv6' {
  return isIP(address) === 6 ? 'ipv6' : 'ipv4';
}

/** Builds a resolver from proxy addresses or CIDR ranges (e.g. 10.0.0.0/8). */
export function clientIpResolver(trustedProxies: readonly string[]): ClientIpResolver {
  if (trustedProxies.length === 0) return (remote) => normalise(remote);
  const trusted = new BlockList();
  for (const entry of trustedProxies) {
    const [address, prefix] = entry.split('/') as [string, string | undefined];
    if (isIP(address) === 0) throw new Error(`trusted proxy is not an IP address or CIDR: ${entry}`);
    if (prefix === undefined) trusted.addAddress(address, family(address));
    else trusted.addSubnet(address, Number(prefix), family(address));
  }
  const isTrusted = (address: string) => isIP(address) !== 0 && trusted.check(address, family(address));

  return (remote, forwardedFor) => {
    let client = normalise(remote);
    if (!forwardedFor || !isTrusted(client)) return client;
    const hops = forwardedFor.split(',').map((hop) => normalise(hop.trim()));
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!;
      if (isIP(hop) === 0) break; // garbage in the header: stop at the last proxy we trust
      client = hop;
      if (!isTrusted(hop)) break;
    }
    return client;
  };
}

/**
 * What a per-client limit counts under: an IPv4 address (or IPv4-mapped IPv6 address) as the
 * IPv4 address; an IPv6 address as its first `ipv6Prefix` bits, in canonical text
 * (`2001:db8:1:2::/64`), so that every spelling and every address of the network is one key.
 * Anything else (no address at all) is its own key.
 */
export function limitKey(address: string, ipv6Prefix: number): string {
  const unzoned = address.split('%')[0]!; // a link-local zone (fe80::1%eth0) names our interface, not the client
  const version = isIP(unzoned);
  if (version === 4) return unzoned;
  if (version !== 6) return address;
  const groups = ipv6Groups(unzoned);
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  const masked = groups.map((group, i) => {
    const kept = Math.min(16, Math.max(0, ipv6Prefix - 16 * i));
    return group & ((0xffff << (16 - kept)) & 0xffff);
  });
  // SocketAddress writes the canonical form (RFC 5952: lower case, zeros compressed).
  const text = new SocketAddress({ address: masked.map((group) => group.toString(16)).join(':'), family: 'ipv6' }).address;
  return ipv6Prefix >= 128 ? text : `${text}/${ipv6Prefix}`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a dotted IPv4 tail read as two groups). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const before = head ? head.split(':') : [];
  const after = tail ? tail.split(':') : [];
  const zeros = tail === undefined ? [] : new Array<string>(8 - before.length - after.length).fill('0');
  return [...before, ...zeros, ...after].map((group) => parseInt(group, 16));
}

/**
 * A per-client limiter: takes a client address (a `ClientIpResolver`'s answer) and counts it
 * under the address's `limitKey`. Every per-client limiter of the composition root is one, so
 * the keying is decided here only.
 */
export class ClientLimiter implements Limiter {
  constructor(private readonly limiter: Limiter, private readonly ipv6Prefix: number) {}

  /** The key the client's takes count under (for callers that hold state of their own per client). */
  keyOf(address: string): string {
    return limitKey(address, this.ipv6Prefix);
  }

  take(address: string): Promise<LimitDecision> | LimitDecision {
    return this.limiter.take(this.keyOf(address));
  }

  shutdown(): Promise<void> {
    return this.limiter.shutdown();
  }
}
