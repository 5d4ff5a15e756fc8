import { describe, expect, it } from 'vitest';
import { clientIpResolver, ClientLimiter, limitKey } from './client-ip.ts';
import { TokenBucketLimiter } from './limiter.ts';

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

describe('limitKey', () => {
  it('keys IPv4 by the address, and IPv4-mapped IPv6 as the IPv4 address', () => {
    expect(limitKey('203.0.113.9', 64)).toBe('203.0.113.9');
    expect(limitKey('::ffff:203.0.113.9', 64)).toBe('203.0.113.9');
    expect(limitKey('::FFFF:cb00:7109', 64)).toBe('203.0.113.9');
  });

  it('keys IPv6 by its network, one canonical text whatever the spelling', () => {
    for (const spelling of ['2001:db8::1', '2001:0db8:0:0::1', '2001:DB8:0:0:0:0:0:1', '2001:db8::ffff:1:2:3', '2001:db8::1%eth0']) {
      expect(limitKey(spelling, 64), spelling).toBe('2001:db8::/64');
    }
    expect(limitKey('2001:db8:1:2:3:4:5:6', 64)).toBe('2001:db8:1:2::/64');
    expect(limitKey('2001:db8:1:3::1', 64)).not.toBe(limitKey('2001:db8:1:2::1', 64));
  });

  it('takes the prefix length it is given, 128 being the address itself', () => {
    expect(limitKey('2001:db8:1:2:3:4:5:6', 48)).toBe('2001:db8:1::/48');
    expect(limitKey('2001:db8:1:2ff:3:4:5:6', 56)).toBe('2001:db8:1:200::/56');
    expect(limitKey('2001:db8:1:2:3:4:5:6', 127)).toBe('2001:db8:1:2:3:4:5:6/127');
    expect(limitKey('2001:0db8:1:2:3:4:5:6', 128)).toBe('2001:db8:1:2:3:4:5:6');
  });

  it('leaves what is not an address as it is', () => {
    expect(limitKey('', 64)).toBe('');
    expect(limitKey('unknown', 64)).toBe('unknown');
  });
});

describe('ClientLimiter', () => {
  it('counts the addresses of one /64 as one client, another /64 apart', () => {
    const limiter = new ClientLimiter(new TokenBucketLimiter({ ratePerMinute: 1, burst: 3 }, () => 0), 64);
    const decisions = [1, 2, 3, 4].map((i) => limiter.take(`2001:db8:5:6::${i}`) as { allowed: boolean });
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect((limiter.take('2001:db8:5:7::1') as { allowed: boolean }).allowed).toBe(true);
    expect(limiter.keyOf('2001:db8:5:6:a:b:c:d')).toBe('2001:db8:5:6::/64');
  });
});
