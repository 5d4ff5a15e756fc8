import { describe, expect, it } from 'vitest';
import { redactUrl } from './redact.ts';

describe('redactUrl', () => {
  it('keeps scheme, user, host, port and path; drops the password, the query and the fragment', () => {
    expect(redactUrl('https://ingest:s3cret@ch.example.com:8443/db?password=s3cret&x=1#frag')).toBe('https://ingest@ch.example.com:8443/db');
    expect(redactUrl('http://default@127.0.0.1:8123')).toBe('http://default@127.0.0.1:8123');
    expect(redactUrl('redis://:s3cret@cache:6379/0')).toBe('redis://***@cache:6379/0');
  });

  it('hides a NATS token standing where a user name would be', () => {
    expect(redactUrl('nats://s3cret@nats-1:4222')).toBe('nats://***@nats-1:4222');
    expect(redactUrl('tls://user:s3cret@nats-1:4222')).toBe('tls://user@nats-1:4222');
  });

  it('does not echo a string that is not a URL', () => {
    expect(redactUrl('http://user:s3cret@[::1')).toBe('(not a valid URL)');
  });
});
