import { describe, expect, it } from 'vitest';
import { clientIpResolver } from './client-ip.ts';

describe('clientIpResolver', () => {
  it('ignores X-Forwarded-For unless the peer is a trusted proxy', () => {
    const resolve = clientIpResolver([]);
    expect(resolve('203.0.113.9', '1.1.1.1')).toBe('203.0.113.9');
    expect(resolve('::ffff:203.0.113.9', undefined)).toBe('203.0.113.9');
  });

  it('takes the right-most untrusted hop behind trusted proxies', () => {
    const resolve = clientIpResolver(['10.0.0.0/8', '192.0.2.1']);
    expect(resolve('10.1.2.3', '198.51.100.7')).toBe('198.51.100.7');
    // A client cannot pick its own address by prepending hops.
    expect(resolve('10.1.2.3', '6.6.6.6, 198.51.100.7, 192.0.2.1')).toBe('198.51.100.7');
    // An untrusted peer's header is ignored.
    expect(resolve('198.51.100.8', '6.6.6.6')).toBe('198.51.100.8');
    // Garbage stops the walk at the last trusted hop.
    expect(resolve('10.1.2.3', 'not-an-ip')).toBe('10.1.2.3');
  });

  it('refuses a proxy entry that is not an address', () => {
    expect(() => clientIpResolver(['proxy.example.com'])).toThrow(/not an IP/);
  });
});
