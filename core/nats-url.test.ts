import { describe, expect, it } from 'vitest';
import { parseNatsUrl } from './nats-url.ts';

describe('parseNatsUrl', () => {
  it('takes the credentials out of the servers, for nats.js, which ignores them in a URL', () => {
    expect(parseNatsUrl('nats://ingest:s%40cret@n1:4222, ingest:s%40cret@n2, n3:4223')).toEqual({
      servers: [
        { host: 'n1', port: 4222, tls: false, hostPort: 'n1:4222', shown: 'nats://ingest@n1:4222' },
        // Without a scheme, as nats.js takes it: nats://, default port.
        { host: 'n2', port: 4222, tls: false, hostPort: 'n2:4222', shown: 'nats://ingest@n2' },
        { host: 'n3', port: 4223, tls: false, hostPort: 'n3:4223', shown: 'nats://n3:4223' },
      ],
      credentials: { user: 'ingest', pass: 's@cret' },
      tls: false,
    });
    expect(parseNatsUrl('nats://user:s%40cret@n1,nats://user:s%40cret@n2').credentials).toEqual({ user: 'user', pass: 's@cret' });
  });

  it('reads a user without a password as a token, shown as ***', () => {
    const { servers, credentials } = parseNatsUrl('tls://s3cret-token@[::1]:4443');
    expect(credentials).toEqual({ token: 's3cret-token' });
    expect(servers).toEqual([{ host: '::1', port: 4443, tls: true, hostPort: '[::1]:4443', shown: 'tls://***@[::1]:4443' }]);
  });

  it('refuses what one set of nats.js options cannot carry, without showing the value', () => {
    const refusals: Array<[string, RegExp]> = [
      ['nats://a:s3cret@n1,nats://b:s3cret@n2', /different credentials/],
      ['nats://a:s3cret@n1,nats://s3cret@n2', /different credentials/],
      ['tls://n1:4222,nats://n2:4222', /same scheme/],
      ['nats://:s3cret@n1', /password but no user/],
      ['http://n1:4222', /scheme is http:/],
      ['nats://user:s3cret@[::1', /must be a valid URL/],
      [' , ', /names no server/],
    ];
    for (const [url, reason] of refusals) {
      expect(() => parseNatsUrl(url), url).toThrow(reason);
      try {
        parseNatsUrl(url);
      } catch (err) {
        expect((err as Error).message).not.toContain('s3cret');
      }
    }
  });
});
