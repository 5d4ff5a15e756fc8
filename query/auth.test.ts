import { describe, expect, it } from 'vitest';
import { ClientLimiter } from '../gateway/client-ip.ts';
import { TokenBucketLimiter } from '../gateway/limiter.ts';
import { credentialsOf, FailedAuthThrottle, PasswordCheck } from './auth.ts';
import { ClickHouseException } from './errors.ts';

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const none = new URLSearchParams();

describe('credentialsOf', () => {
  it('reads the X-ClickHouse headers, Basic auth or the URL parameters, as ClickHouse does', () => {
    expect(credentialsOf({ 'x-clickhouse-user': 'grafana', 'x-clickhouse-key': 'k:ey', 'x-clickhouse-ssl-certificate-auth': 'off' }, none)).toEqual({ user: 'grafana', password: 'k:ey' });
    expect(credentialsOf({ authorization: basic('grafana', 'p:w') }, none)).toEqual({ user: 'grafana', password: 'p:w' });
    expect(credentialsOf({}, new URLSearchParams('user=grafana&password=pw'))).toEqual({ user: 'grafana', password: 'pw' });
    expect(credentialsOf({}, none)).toEqual({ user: 'default', password: '' });
  });

  it('refuses two schemes at once and schemes it does not take (516)', () => {
    const codeOf = (headers: Record<string, string>, search = none) => {
      try {
        credentialsOf(headers, search);
      } catch (err) {
        return (err as ClickHouseException).code;
      }
      return 0;
    };
    expect(codeOf({ 'x-clickhouse-user': 'a', authorization: basic('a', 'b') })).toBe(516);
    expect(codeOf({ authorization: basic('a', 'b') }, new URLSearchParams('password=x'))).toBe(516);
    expect(codeOf({ authorization: 'Bearer token' })).toBe(516);
    expect(codeOf({ 'x-clickhouse-user': 'a', 'x-clickhouse-ssl-certificate-auth': 'on' })).toBe(516);
  });
});

describe('PasswordCheck', () => {
  it('matches the configured user and password only', () => {
    const check = new PasswordCheck('grafana', 'correct horse');
    expect(check.matches({ user: 'grafana', password: 'correct horse' })).toBe(true);
    expect(check.matches({ user: 'grafana', password: 'correct hors' })).toBe(false);
    expect(check.matches({ user: 'default', password: 'correct horse' })).toBe(false);
    expect(check.matches({ user: 'grafana', password: '' })).toBe(false);
  });
});

describe('FailedAuthThrottle', () => {
  it('holds an address off once its failures used up the bucket, until a token is back', async () => {
    let now = 0;
    const throttle = new FailedAuthThrottle(new ClientLimiter(new TokenBucketLimiter({ ratePerMinute: 6, burst: 3 }, () => now), 64), () => now);
    for (let i = 0; i < 3; i++) {
      throttle.admit('10.0.0.1');
      await throttle.failed('10.0.0.1');
    }
    throttle.admit('10.0.0.1'); // three failures: the bucket is empty, the address not yet held off
    await throttle.failed('10.0.0.1');
    let refused: unknown;
    try {
      throttle.admit('10.0.0.1');
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(ClickHouseException);
    expect((refused as ClickHouseException).status).toBe(429);
    expect((refused as ClickHouseException).options.retryAfterSeconds).toBe(10);
    expect(() => throttle.admit('10.0.0.2')).not.toThrow();
    now += 10_000;
    expect(() => throttle.admit('10.0.0.1')).not.toThrow();
  });

  it('holds off every address of the IPv6 network that failed, and only that network', async () => {
    let now = 0;
    const throttle = new FailedAuthThrottle(new ClientLimiter(new TokenBucketLimiter({ ratePerMinute: 6, burst: 3 }, () => now), 64), () => now);
    // Each failure from another address of 2001:db8:0:7::/64, as a client rotating through its /64 would.
    for (let i = 1; i <= 4; i++) {
      throttle.admit(`2001:db8:0:7::${i}`);
      await throttle.failed(`2001:db8:0:7::${i}`);
    }
    expect(() => throttle.admit('2001:db8:0:7:ffff:1:2:3')).toThrow(/Too many failed authentications/);
    expect(() => throttle.admit('2001:0DB8:0000:0007::9')).toThrow(/Too many failed authentications/);
    expect(() => throttle.admit('2001:db8:0:8::1')).not.toThrow();
  });
});
