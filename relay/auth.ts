/**
 * Sessions of the relay's admin API: bearer tokens from POST /api/v1/admin/login, made and
 * checked by the shared account sessions (accounts/sessions.ts) under the relay's own issuer
 * and records; DELETE /api/v1/admin/session ends one.
 */
import type { AccountStore, Session, User } from '../accounts/index.ts';
import { Sessions } from '../accounts/index.ts';
import type { StateStore } from '../state/store.ts';
import { unauthorized } from './errors.ts';

const ISSUER = 'sluice-relay';
const SESSIONS = 'relay_admin_sessions';

export class AdminSessions {
  private readonly sessions: Sessions;

  constructor(key: Uint8Array, accounts: AccountStore, state: StateStore) {
    this.sessions = new Sessions(key, accounts, ISSUER, state, SESSIONS);
  }

  async issue(user: User): Promise<Session> {
    const { token, expiresAt } = await this.sessions.issue(user);
    return { token, expiresAt };
  }

  /** The active user a bearer token stands for, and its session; 401 otherwise. */
  async authenticate(authorization: string | undefined): Promise<{ user: User; sessionId: string }> {
    const token = /^Bearer\s+(\S+)$/i.exec(authorization?.trim() ?? '')?.[1];
    if (!token) throw unauthorized('Missing session: send Authorization: Bearer <token> from POST /api/v1/admin/login');
    const verified = await this.sessions.verify(token);
    if (!verified) throw unauthorized('Invalid or expired session');
    return { user: verified.user, sessionId: verified.sessionId };
  }

  end(sessionId: string): Promise<void> {
    return this.sessions.end(sessionId);
  }
}
