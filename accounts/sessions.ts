/**
 * Sessions as HS256 JWTs (jose) that name the user, the tenant, the user's session version and
 * a session record in the state store. Each check re-reads the user from the in-memory account
 * store, so a deactivation, a role change or a password change takes effect on the next
 * request, whatever tokens are out there; and reads the record from the store, so signing out
 * (deleting the record) ends that one session at once on every gateway, even if its token was
 * copied. Records expire with their tokens.
 *
 * Each front end has its own issuer (the relay's admin API: bearer tokens; the console: a
 * cookie), so a token made for one is refused by the other: a console cookie cannot be replayed
 * as a bearer token where no Origin or CSRF check applies.
 *
 * A user holds at most MAX_SESSIONS_PER_USER sessions per front end: each user has an index
 * record of their session ids (changed by compare-and-set, so two gateways signing the same
 * user in at once both count), and a sign-in past the cap ends the user's oldest session.
 * Without it, a script signing in again and again would fill the store for 12 hours.
 */
import { randomBytes } from 'node:crypto';
import { jwtVerify, SignJWT } from 'jose';
import type { StateStore } from '../state/store.ts';
import type { Tenant, User } from './model.ts';
import type { AccountStore } from './store.ts';

export const SESSION_HOURS = 12;
export const MAX_SESSIONS_PER_USER = 20;
/** Clocks of the gateways that issue and check a session may differ by this much. */
const CLOCK_TOLERANCE_SECONDS = 60;

export interface Session {
  token: string;
  expiresAt: string;
}

/** A verified token: its active user and their tenant, and the session it names. */
export interface SessionClaims {
  user: User;
  tenant: Tenant;
  sessionId: string;
}

interface SessionRecord {
  userId: string;
  createdAt: string;
}

/** A user's sessions by id: when each ends (ms since the epoch). */
interface SessionIndex {
  sessions: Record<string, number>;
}

export class Sessions {
  /** `bucket`: the front end's session records (each front end its own). */
  constructor(
    private readonly key: Uint8Array,
    private readonly accounts: AccountStore,
    private readonly issuer: string,
    private readonly state: StateStore,
    private readonly bucket: string,
  ) {
    state.expireAfter(bucket, SESSION_HOURS * 3600_000);
    // An index outlives none of its sessions: each session is indexed by a write of the index.
    state.expireAfter(this.indexBucket, SESSION_HOURS * 3600_000);
  }

  private get indexBucket(): string {
    return `${this.bucket}_by_user`;
  }

  /** A new session of `user`: its token, and its id (for sign-out). Past the cap, the user's oldest session ends. */
  async issue(user: User): Promise<Session & { sessionId: string }> {
    const sessionId = randomBytes(18).toString('base64url');
    const expires = Math.floor(Date.now() / 1000) + SESSION_HOURS * 3600;
    const record: SessionRecord = { userId: user.id, createdAt: new Date().toISOString() };
    const evicted = await this.index(user.id, (sessions) => {
      sessions[sessionId] = expires * 1000;
      const oldest = Object.entries(sessions).sort(([, a], [, b]) => a - b).map(([id]) => id);
      const over = oldest.slice(0, Math.max(0, oldest.length - MAX_SESSIONS_PER_USER));
      for (const id of over) delete sessions[id];
      return over;
    });
    await this.state.put(this.bucket, sessionId, record);
    for (const id of evicted) await this.state.delete(this.bucket, id);
    const token = await new SignJWT({ sid: sessionId, tid: user.tenantId, sv: user.sessionVersion })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(this.issuer)
      .setSubject(user.id)
      .setIssuedAt()
      .setExpirationTime(expires)
      .sign(this.key);
    return { token, expiresAt: new Date(expires * 1000).toISOString(), sessionId };
  }

  /** Ends a session: its token is refused from now on, wherever it is presented. */
  async end(sessionId: string): Promise<void> {
    const record = await this.state.get<SessionRecord>(this.bucket, sessionId);
    await this.state.delete(this.bucket, sessionId);
    if (typeof record?.userId === 'string') await this.index(record.userId, (sessions) => void delete sessions[sessionId]);
  }

  /**
   * Changes the user's index by compare-and-set (again when another gateway got in first),
   * its ended sessions dropped first. Returns what `change` returned.
   */
  private async index<R>(userId: string, change: (sessions: Record<string, number>) => R): Promise<R> {
    for (;;) {
      const stored = await this.state.getVersioned<SessionIndex>(this.indexBucket, userId);
      const now = Date.now();
      const sessions: Record<string, number> = {};
      for (const [id, endsAt] of Object.entries(stored?.value?.sessions ?? {})) if (typeof endsAt === 'number' && endsAt > now) sessions[id] = endsAt;
      const result = change(sessions);
      const written = stored
        ? await this.state.update<SessionIndex>(this.indexBucket, userId, { sessions }, stored.revision)
        : await this.state.create<SessionIndex>(this.indexBucket, userId, { sessions });
      if (written !== undefined) return result;
    }
  }

  /** The active user a token stands for, or undefined. */
  async verify(token: string): Promise<SessionClaims | undefined> {
    let claims: Record<string, unknown> & { sub?: string; tid?: unknown; sv?: unknown; sid?: unknown };
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
    if (!active || active.user.tenantId !== claims.tid || active.user.sessionVersion !== claims.sv || typeof claims.sid !== 'string') return undefined;
    // The store, not a mirror: a session ended on another gateway is refused on the next request.
    const record = await this.state.get<SessionRecord>(this.bucket, claims.sid);
    if (record?.userId !== active.user.id) return undefined;
    return { ...active, sessionId: claims.sid };
  }
}
