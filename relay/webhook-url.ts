/**
 * Webhook destinations are URLs a tenant types in and the relay later calls: an SSRF vector.
 * At configuration time a URL must be http(s), carry no credentials, and not name a loopback,
 * private, link-local (cloud metadata), CGNAT, multicast or unspecified address, nor
 * `localhost`. A host name can still resolve to such an address later: delivery re-checks the
 * resolved address before connecting (relay delivery). SLUICE_RELAY_ALLOW_PRIVATE_WEBHOOKS
 * lifts the address rule for on-premises receivers.
 */
import { BlockList, isIP } from 'node:net';

const blocked = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['::ffff:0:0', 96]] as const) {
  blocked.addSubnet(network, prefix, 'ipv6');
}

/** Whether an IP address is one a webhook may not reach (loopback, private, metadata...). */
export function isBlockedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  return blocked.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

export function isAcceptableWebhookUrl(value: string, allowPrivate: boolean): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return false;
  if (url.username || url.password) return false;
  if (allowPrivate) return true;
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return false;
  return !isBlockedAddress(host);
}
