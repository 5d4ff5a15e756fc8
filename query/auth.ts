/**
 * Authentication of the query endpoint, as ClickHouse's HTTP interface takes credentials
 * (src/Server/HTTP/authenticateUserByHTTP.cpp): the X-ClickHouse-User and X-ClickHouse-Key
 * headers, else HTTP Basic auth, else the `user` and `password` URL parameters, never two of
 * these at once; no credentials at all is the user `default` without a password. One user,
 * from the config; the password is compared in constant time and never logged.
 *
 * Guessing is throttled per client address (per network for IPv6: the limiter's key): each
 * failure takes a token from a bucket, and an address whose bucket is empty is refused before
 * its credentials are looked at (so a right guess is no different from a wrong one), until a
 * token is back.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { ClientLimiter } from '../gateway/client-ip.ts';
import { ClickHouseException } from './errors.ts';

export interface Credentials {
  user: string;
  password: string;
}

type Headers = Readonly<Record<string, string | undefined>>;

/** The credentials a request presents; refuses mixed or unsupported schemes as ClickHouse does. */
export function credentialsOf(headers: Headers, search: URLSearchParams): Credentials {
  const headerUser = headers['x-clickhouse-user'] ?? '';
  const headerKey = headers['x-clickhouse-key'] ?? '';
  const authorization = headers.authorization;
  const inParams = search.has('user') || search.has('password');
  if (headers['x-clickhouse-ssl-certificate-auth'] === 'on') throw failed('SSL certificate authentication is not supported here');
  if (headerUser || headerKey) {
    if (authorization !== undefined) throw mixed('X-ClickHouse HTTP headers', 'Authorization HTTP header');
    if (inParams) throw mixed('X-ClickHouse HTTP headers', 'authentication via parameters');
    return { user: headerUser, password: headerKey };
  }
  if (authorization !== undefined) {
    if (inParams) throw mixed('Authorization HTTP header', 'authentication via parameters');
    const [scheme = '', encoded = ''] = authorization.trim().split(/\s+/);
    if (scheme.toLowerCase() !== 'basic') throw failed(`'${scheme.slice(0, 32)}' HTTP Authorization scheme is not supported`);
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    return colon < 0 ? { user: decoded, password: '' } : { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
  }
  return { user: search.get('user') ?? 'default', password: search.get('password') ?? '' };
}

/** The configured user and password, held as digests: comparing them takes the same time whatever is presented. */
export class PasswordCheck {
  private readonly user: Buffer;
  private readonly password: Buffer;

  constructor(user: string, password: string) {
    this.user = digest(user);
    this.password = digest(password);
  }

  matches(credentials: Credentials): boolean {
    // Both compared, always: which one differs does not show in the time taken.
    const userMatches = timingSafeEqual(this.user, digest(credentials.user));
    const passwordMatches = timingSafeEqual(this.password, digest(credentials.password));
    return userMatches && passwordMatches;
  }
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * Addresses that failed too often, refused until their bucket has a token again. Held off by
 * the limiter's key, so every address of an IPv6 network is held off with the one that failed.
 */
export class FailedAuthThrottle {
  private readonly blockedUntil = new Map<string, number>();

  constructor(private readonly limiter: ClientLimiter, private readonly now: () => number = Date.now) {}

  /** Refuses (429) an address that is being held off. */
  admit(ip: string): void {
    const key = this.limiter.keyOf(ip);
    const until = this.blockedUntil.get(key);
    if (until === undefined) return;
    const leftMs = until - this.now();
    if (leftMs <= 0) {
      this.blockedUntil.delete(key);
      return;
    }
    const retryAfterSeconds = Math.ceil(leftMs / 1000);
    throw ClickHouseException.of('AUTHENTICATION_FAILED', `Too many failed authentications from this address; retry in ${retryAfterSeconds} s`, { status: 429, retryAfterSeconds });
  }

  /** Counts a failure; the one that empties the bucket holds the address off. */
  async failed(ip: string): Promise<void> {
    const decision = await this.limiter.take(ip);
    if (decision.allowed) return;
    if (this.blockedUntil.size >= 10_000) this.forgetExpired();
    this.blockedUntil.set(this.limiter.keyOf(ip), this.now() + decision.retryAfterSeconds * 1000);
  }

  private forgetExpired(): void {
    const now = this.now();
    for (const [ip, until] of this.blockedUntil) if (until <= now) this.blockedUntil.delete(ip);
  }
}

/** ClickHouse's answer to wrong credentials (403, code 516). */
export function authenticationFailed(user: string): ClickHouseException {
  return failed(`${user.slice(0, 64)}: Authentication failed: password is incorrect, or there is no user with such name`);
}

function failed(message: string): ClickHouseException {
  return ClickHouseException.of('AUTHENTICATION_FAILED', message);
}

function mixed(first: string, second: string): ClickHouseException {
  return failed(`Invalid authentication: it is not allowed to use ${first} and ${second} simultaneously`);
}
