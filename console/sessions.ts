/**
 * Console sessions: an HttpOnly, SameSite=Strict cookie carrying a session token
 * (accounts/sessions.ts, under the console's own issuer and records). The CSRF token is an HMAC of the session id: a page on another
 * origin can neither read it nor compute it, and it needs no storage of its own.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { SESSION_HOURS, Sessions, type AccountStore, type Tenant, type User } from '../accounts/index.ts';
import type { StateStore } from '../state/store.ts';

const ISSUER = 'sluice-console';
export const SESSION_COOKIE = 'sluice_session';
const SESSIONS = 'console_sessions';

export interface SignedIn {
  user: User;
  tenant: Tenant;
  sessionId: string;
  csrfToken: string;
}

export class ConsoleSessions {
  private readonly sessions: Sessions;

  /**
   * @param keys HS256 key of the JWT and HMAC key of CSRF tokens (both derived from the master key)
   * @param secureCookie mark the cookie Secure (the console is served over https)
   */
  constructor(
    private readonly keys: { session: Uint8Array; csrf: Uint8Array },
    private readonly accounts: AccountStore,
    state: StateStore,
    private readonly secureCookie: boolean,
  ) {
    this.sessions = new Sessions(keys.session, accounts, ISSUER, state, SESSIONS);
  }

  /** Starts a session for `user`: its Set-Cookie value and what the page needs. */
  async start(user: User): Promise<{ setCookie: string; signedIn: SignedIn }> {
    const { token, sessionId } = await this.sessions.issue(user);
    const tenant = this.accounts.tenants.get(user.tenantId)!;
    return { setCookie: this.cookie(token, SESSION_HOURS * 3600), signedIn: { user, tenant, sessionId, csrfToken: this.csrfToken(sessionId) } };
  }

  /** The signed-in user of a request's Cookie header, or undefined. */
  async check(cookieHeader: string | undefined): Promise<SignedIn | undefined> {
    const token = cookieValue(cookieHeader, SESSION_COOKIE);
    if (!token) return undefined;
    const verified = await this.sessions.verify(token);
    if (!verified) return undefined;
    const { user, tenant, sessionId } = verified;
    return { user, tenant, sessionId, csrfToken: this.csrfToken(sessionId) };
  }

  /** Ends a session: its cookie is refused from now on, wherever it is presented. */
  async end(sessionId: string): Promise<string> {
    await this.sessions.end(sessionId);
    return this.cookie('', 0);
  }

  /** Whether `presented` is the CSRF token of the session (constant time). */
  csrfMatches(sessionId: string, presented: string | undefined): boolean {
    const expected = Buffer.from(this.csrfToken(sessionId));
    const given = Buffer.from(presented ?? '');
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  private csrfToken(sessionId: string): string {
    return createHmac('sha256', this.keys.csrf).update(sessionId).digest('base64url');
  }

  private cookie(value: string, maxAgeSeconds: number): string {
    return `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${this.secureCookie ? '; Secure' : ''}`;
  }
}

/** One cookie's value from a Cookie header (`a=1; b=2`). */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
