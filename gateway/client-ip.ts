/**
 * The client IP that rate limits apply to. X-Forwarded-For is honoured only when the peer is a
 * configured proxy; then the client is the right-most address that is not itself a trusted
 * proxy (addresses left of it are whatever the client chose to send).
 */
import { BlockList, isIP } from 'node:net';

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
