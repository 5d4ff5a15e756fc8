/**
 * Session tokens: only what issue() makes is accepted. A token signed with the real key but
 * without an expiry, or with times no session of ours has, is refused like a forged one.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalStateStore } from '../state/local.ts';
import { AccountStore } from '../accounts/store.ts';
import type { User } from '../accounts/model.ts';
import { MAX_SESSIONS_PER_USER } from '../accounts/sessions.ts';
import { AdminSessions } from './auth.ts';

const key = randomBytes(32);
const user: User = {
  id: 'usr_1', tenantId: 'ten_1', email: 'owner@acme.example', name: 'Owner', role: 'owner', active: true,
  passwordHash: 'x', mustChangePassword: false, sessionVersion: 3, createdAt: '2026-01-01T00:00:00Z', updatedAt: '2026-01-01T00:00:00Z',
};
/** A user who signs in again and again. */
const busy: User = { ...user, id: 'usr_busy', email: 'busy@acme.example' };
let dir: string;
let state: LocalStateStore;
let sessions: AdminSessions;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-relay-auth-'));
  state = new LocalStateStore(dir);
  await state.start();
  await state.put('relay_users', user.id, user);
  await state.put('relay_users', busy.id, busy);
  await state.put('relay_tenants', 'ten_1', { id: 'ten_1', name: 'Acme', createdAt: user.createdAt, updatedAt: user.createdAt });
  const accounts = new AccountStore(state, pino({ level: 'silent' }));
  await accounts.start();
  sessions = new AdminSessions(key, accounts, state);
  await state.put('relay_admin_sessions', 'sid_1', { userId: user.id, createdAt: user.createdAt });
});
afterAll(async () => {
  await state?.shutdown();
  await rm(dir, { recursive: true, force: true });
});

const now = () => Math.floor(Date.now() / 1000);

/** A token with the claims issue() puts in, signed with the real key; `times` replaces iat, exp, nbf. */
function signed(times: { iat?: number; exp?: number; nbf?: number }): Promise<string> {
  const jwt = new SignJWT({ sid: 'sid_1', tid: user.tenantId, sv: user.sessionVersion, ...times }).setProtectedHeader({ alg: 'HS256' }).setIssuer('sluice-relay').setSubject(user.id);
  return jwt.sign(key);
}

const outcome = (token: string) => sessions.authenticate(`Bearer ${token}`).then(({ user: signedIn }) => signedIn.id, (err: Error) => err.message);

describe('relay sessions', () => {
  it('accepts what issue() makes and refuses a real-key token without exp, or with impossible times', async () => {
    expect(await outcome((await sessions.issue(user)).token)).toBe('usr_1');
    expect(await outcome(await signed({ iat: now(), exp: now() + 3600 }))).toBe('usr_1');
    const refused = 'Invalid or expired session';
    expect(await outcome(await signed({ iat: now() }))).toBe(refused); // no exp: valid forever otherwise
    expect(await outcome(await signed({ exp: now() + 3600 }))).toBe(refused); // no iat
    expect(await outcome(await signed({ iat: now() + 3600, exp: now() + 7200 }))).toBe(refused); // issued in the future
    expect(await outcome(await signed({ iat: now() - 13 * 3600, exp: now() + 3600 }))).toBe(refused); // older than a session lasts
    expect(await outcome(await signed({ iat: now(), exp: now() + 3600, nbf: now() + 600 }))).toBe(refused); // not valid yet
    expect(await outcome(await signed({ iat: now() - 3600, exp: now() - 120 }))).toBe(refused); // expired
  });

  it('ends one session on sign-out: its token is refused, the user\'s other sessions go on', async () => {
    const first = await sessions.issue(user);
    const second = await sessions.issue(user);
    const { sessionId } = await sessions.authenticate(`Bearer ${first.token}`);
    await sessions.end(sessionId);
    expect(await outcome(first.token)).toBe('Invalid or expired session');
    expect(await outcome(second.token)).toBe('usr_1');
  });

  it(`keeps at most ${MAX_SESSIONS_PER_USER} sessions per user: a sign-in past them ends the oldest, also when sign-ins race`, async () => {
    const stored = async () => (await state.list<{ userId: string }>('relay_admin_sessions')).filter(([, record]) => record.userId === busy.id).length;
    const first = [];
    for (let i = 0; i < MAX_SESSIONS_PER_USER + 5; i++) first.push(await sessions.issue(busy));
    const outcomes = await Promise.all(first.map(({ token }) => outcome(token)));
    expect(outcomes.slice(0, 5)).toEqual(Array(5).fill('Invalid or expired session'));
    expect(outcomes.slice(5)).toEqual(Array(MAX_SESSIONS_PER_USER).fill(busy.id));
    expect(await stored()).toBe(MAX_SESSIONS_PER_USER);
    // Thirty at once, as from many gateways: each counts the others.
    const racing = await Promise.all(Array.from({ length: 30 }, () => sessions.issue(busy)));
    expect(await stored()).toBe(MAX_SESSIONS_PER_USER);
    const live = [];
    for (const session of racing) if ((await outcome(session.token)) === busy.id) live.push(session.token);
    expect(live).toHaveLength(MAX_SESSIONS_PER_USER);
    // A session signed out leaves the count: the next sign-in ends no one else's.
    await sessions.end((await sessions.authenticate(`Bearer ${live[0]}`)).sessionId);
    await sessions.issue(busy);
    expect(await Promise.all(live.slice(1).map(outcome))).toEqual(Array(MAX_SESSIONS_PER_USER - 1).fill(busy.id));
  });

  it('refuses a real-key token that names no session record', async () => {
    const jwt = new SignJWT({ sid: 'never_issued', tid: user.tenantId, sv: user.sessionVersion }).setProtectedHeader({ alg: 'HS256' })
      .setIssuer('sluice-relay').setSubject(user.id).setIssuedAt().setExpirationTime('1h');
    expect(await outcome(await jwt.sign(key))).toBe('Invalid or expired session');
  });
});
