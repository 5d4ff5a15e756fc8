/**
 * Sessions of the relay's admin API: bearer tokens from POST /api/v1/admin/login, made and
 * checked by the shared account sessions (accounts/sessions.ts) under the relay's own issuer.
 */
import type { AccountStore, Session, User } from '../accounts/index.ts';
import { Sessions } from '../accounts/index.ts';
import { unauthorized } from './errors.ts';

const ISSUER = 'sluice-relay';

export class AdminSessions {
  private readonly sessions: Sessions;

  constructor(key: Uint8Array, accounts: AccountStore) {
    this.sessions = new Sessions(key, accounts, ISSUER);
  }

  issue(user: User): Promise<Session> {
    return this.sessions.issue(user);
  }

  /** The active user a bearer token stands for; 401 otherwise. */
  async authenticate(authorization: string | undefined): Promise<User> {
    const token = /^Bearer\s+(\S+)$/i.exec(authorization?.trim() ?? '')?.[1];
    if (!token) throw unauthorized('Missing session: send Authorization: Bearer <token> from POST /api/v1/admin/login');
    const verified = await this.sessions.verify(token);
    if (!verified) throw unauthorized('Invalid or expired session');
    return verified.user;
  }
}
