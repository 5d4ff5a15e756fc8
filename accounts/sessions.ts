/**
 * Sessions as HS256 JWTs (jose) that name the user, the tenant and the user's session version.
 * Each check re-reads the user from the in-memory account store, so a deactivation, a role
 * change or a password change takes effect on the next request, whatever tokens are out there.
 *
 * Each front end has its own issuer (the relay's admin API: bearer tokens; the console: a
 * cookie), so a token made for one is refused by the other: a console cookie cannot be replayed
 * as a bearer token where no Origin or CSRF check applies.
 */
import { jwtVerify, SignJWT } from 'jose';
import type { Tenant, User } from './model.ts';
import type { AccountStore } from './store.ts';

export const SESSION_HOURS = 12;
/** Clocks of the gateways that issue and check a session may differ by this much. */
const CLOCK_TOLERANCE_SECONDS = 60;

export interface Session {
  token: string;
  expiresAt: string;
}

/** A verified token: its active user and their tenant, and the extra claims it was issued with. */
export interface SessionClaims {
  user: User;
  tenant: Tenant;
  claims: Record<string, unknown>;
}

export class Sessions {
  constructor(private readonly key: Uint8Array, private readonly accounts: AccountStore, private readonly issuer: string) {}

  /** `extra`: claims of the front end's own (the console's session id). */
  async issue(user: User, extra: Record<string, string> = {}): Promise<Session> {
    const expires = Math.floor(Date.now() / 1000) + SESSION_HOURS * 3600;
    const token = await new SignJWT({ ...extra, tid: user.tenantId, sv: user.sessionVersion })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(this.issuer)
      .setSubject(user.id)
      .setIssuedAt()
      .setExpirationTime(expires)
      .sign(this.key);
    return { token, expiresAt: new Date(expires * 1000).toISOString() };
  }

  /** The active user a token stands for, or undefined. */
  async verify(token: string): Promise<SessionClaims | undefined> {
    let claims: Record<string, unknown> & { sub?: string; tid?: unknown; sv?: unknown };
    try {
      // Every session we issue has exp and iat: a token without them (or issued in the future,
      // or longer ago than a session lasts) was not made by issue(), whatever key signed it.
      ({ payload: claims } = await jwtVerify(token, this.key, {
        issuer: this.issuer,
        algorithms: ['HS256'],
        requiredClaims: ['exp', 'iat', 'sub'],
        maxTokenAge: SESSION_HOURS * 3600,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
      }));
    } catch {
      return undefined;
    }
    const active = claims.sub ? this.accounts.activeUser(claims.sub) : undefined;
    if (!active || active.user.tenantId !== claims.tid || active.user.sessionVersion !== claims.sv) return undefined;
    return { ...active, claims };
  }
}
