/**
 * Admin authentication: passwords hashed with argon2id (@node-rs/argon2, its defaults:
 * 19 MiB, 2 passes), sessions as HS256 JWTs (jose) that name the user, the tenant and the
 * user's session version. Each request re-reads the user from the in-memory store, so a
 * deactivation, a role change or a password change takes effect on the next request, whatever
 * tokens are out there.
 */
import { hash, verify } from '@node-rs/argon2';
import { jwtVerify, SignJWT } from 'jose';
import { randomBytes } from 'node:crypto';
import { unauthorized } from './errors.ts';
import type { User } from './model.ts';
import type { RelayStore } from './store.ts';

const ISSUER = 'sluice-relay';
export const SESSION_HOURS = 12;
/** Clocks of the gateways that issue and check a session may differ by this much. */
const CLOCK_TOLERANCE_SECONDS = 60;

export function hashPassword(password: string): Promise<string> {
  return hash(password);
}

/** A random password for invitations and onboarding, shown once. */
export function oneTimePassword(): string {
  return randomBytes(18).toString('base64url');
}

/** An argon2 hash of nothing anyone knows: login checks it for unknown emails too, so timing tells nothing. */
let decoyHash: Promise<string> | undefined;

export async function checkPassword(user: User | undefined, password: string): Promise<boolean> {
  if (!user) {
    decoyHash ??= hash(randomBytes(16).toString('hex'));
    await verify(await decoyHash, password);
    return false;
  }
  return verify(user.passwordHash, password);
}

export interface Session {
  token: string;
  expiresAt: string;
}

export class Sessions {
  constructor(private readonly key: Uint8Array, private readonly store: RelayStore) {}

  async issue(user: User): Promise<Session> {
    const expires = Math.floor(Date.now() / 1000) + SESSION_HOURS * 3600;
    const token = await new SignJWT({ tid: user.tenantId, sv: user.sessionVersion })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(ISSUER)
      .setSubject(user.id)
      .setIssuedAt()
      .setExpirationTime(expires)
      .sign(this.key);
    return { token, expiresAt: new Date(expires * 1000).toISOString() };
  }

  /** The active user a bearer token stands for; 401 otherwise. */
  async authenticate(authorization: string | undefined): Promise<User> {
    const token = /^Bearer\s+(\S+)$/i.exec(authorization?.trim() ?? '')?.[1];
    if (!token) throw unauthorized('Missing session: send Authorization: Bearer <token> from POST /api/v1/admin/login');
    let claims: { sub?: string; tid?: unknown; sv?: unknown };
    try {
      // Every session we issue has exp and iat: a token without them (or issued in the future,
      // or longer ago than a session lasts) was not made by issue(), whatever key signed it.
      ({ payload: claims } = await jwtVerify(token, this.key, {
        issuer: ISSUER,
        algorithms: ['HS256'],
        requiredClaims: ['exp', 'iat', 'sub'],
        maxTokenAge: SESSION_HOURS * 3600,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
      }));
    } catch {
      throw unauthorized('Invalid or expired session');
    }
    const user = claims.sub ? this.store.users.get(claims.sub) : undefined;
    if (!user || !user.active || user.tenantId !== claims.tid || user.sessionVersion !== claims.sv) {
      throw unauthorized('Invalid or expired session');
    }
    return user;
  }
}
