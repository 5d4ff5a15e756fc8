/**
 * Guessing at passwords on a running `sluice serve`, behind a trusted proxy whose
 * X-Forwarded-For names the client: per client IP, an IPv6 client is its /64, so addresses
 * rotated within it are limited like one address (console sign-in, relay login, handover claim,
 * the query endpoint's authentication), while another /64 is not; per account, wrong passwords
 * from any number of networks lock the account out (429) after SLUICE_SIGN_IN_LOCKOUT_FAILURES,
 * for the console and the relay alike, and leave other accounts alone; wrong current passwords
 * of one's own password change count there too (a stolen session must not guess at will).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleClient } from './console-client.ts';
import { freePort } from './free-port.ts';
import { startTestSluice, type TestSluice } from './harness.ts';

const PASSWORD = 'correct horse battery staple';
const QUERY_PASSWORD = 'sign-in-limits-query-secret';
/** The sign-in limit per client (relay/index.ts SIGN_IN_PER_MINUTE) and the lockout's default threshold. */
const PER_CLIENT = 10;
const FAILURES = 10;

let app: TestSluice;
let relayBase: string;

beforeAll(async () => {
  app = await startTestSluice({
    'console.enabled': true,
    'query.port': await freePort(),
    'query.password': QUERY_PASSWORD,
    // The test is the proxy: its X-Forwarded-For names the client.
    'limits.trustedProxies': ['127.0.0.1'],
  });
  relayBase = `http://127.0.0.1:${app.relay!.port}/api/v1`;
}, 60_000);
afterAll(async () => app?.stop());

let networks = 0;
/**
 * A /48 of its own for each use: `subnet(n)(i)` is an address of its n-th /64 (random in the
 * interface bits, as a client rotating its address picks them), `address` the first /64's, and
 * `respelled` an address of that /64 written with upper case and leading zeros.
 */
function freshNetwork() {
  const site = (++networks).toString(16);
  const random = () => randomBytes(2).readUInt16BE().toString(16);
  const subnet = (n: number) => (i: number) => `2001:db8:${site}:${n.toString(16)}:${random()}:${random()}:${random()}:${(i + 1).toString(16)}`;
  return { subnet, address: subnet(1), respelled: `2001:0DB8:${site.toUpperCase().padStart(4, '0')}:0001:0:0:0:ABC` };
}

/** An address of a /64 no other call used. */
const lone = () => freshNetwork().address(0);

const uniqueEmail = (what: string) => `${what}-${randomBytes(4).toString('hex')}@limits.test`;

function consoleSignIn(from: string, email: string, password: string) {
  return new ConsoleClient(app.console!.url).call('/api/session', { method: 'POST', body: { email, password }, headers: { 'x-forwarded-for': from } });
}

function relayPost(from: string, path: string, body: unknown) {
  return fetch(relayBase + path, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': from }, body: JSON.stringify(body) });
}

function query(from: string, password: string) {
  const authorization = `Basic ${Buffer.from(`grafana:${password}`).toString('base64')}`;
  return fetch(`http://127.0.0.1:${app.queryPort}/?query=SELECT+1`, { headers: { authorization, 'x-forwarded-for': from } });
}

/** An account with a password of its own (no one-time password to change). */
async function account(): Promise<string> {
  const email = uniqueEmail('owner');
  await app.relay!.admin.tenants.onboard({ name: `Tenant ${email}`, owner: { email, password: PASSWORD } });
  return email;
}

describe('per client IP, an IPv6 /64 is one client', () => {
  it('console sign-in', async () => {
    const { subnet, address, respelled } = freshNetwork();
    const statuses: number[] = [];
    // Each attempt from another address of the /64, at another email (no account is locked).
    for (let i = 0; i < PER_CLIENT; i++) statuses.push((await consoleSignIn(address(i), uniqueEmail('guess'), 'guess')).status);
    expect(statuses).toEqual(Array(PER_CLIENT).fill(401));
    const limited = await consoleSignIn(address(PER_CLIENT), uniqueEmail('guess'), 'guess');
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await limited.json()).toEqual({ message: 'Too many sign-in attempts: try again later', statusCode: 429 });
    // Any spelling of an address of that /64 is the same client; the next /64 is another.
    expect((await consoleSignIn(respelled, uniqueEmail('guess'), 'guess')).status).toBe(429);
    expect((await consoleSignIn(subnet(2)(0), uniqueEmail('guess'), 'guess')).status).toBe(401);
  });

  it('relay login', async () => {
    const { subnet, address } = freshNetwork();
    const statuses: number[] = [];
    for (let i = 0; i < PER_CLIENT; i++) statuses.push((await relayPost(address(i), '/admin/login', { email: uniqueEmail('guess'), password: 'guess' })).status);
    expect(statuses).toEqual(Array(PER_CLIENT).fill(401));
    const limited = await relayPost(address(PER_CLIENT), '/admin/login', { email: uniqueEmail('guess'), password: 'guess' });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await limited.json()).toEqual({ message: 'ThrottlerException: Too Many Requests', statusCode: 429 });
    expect((await relayPost(subnet(2)(0), '/admin/login', { email: uniqueEmail('guess'), password: 'guess' })).status).toBe(401);
  });

  it('handover claim', async () => {
    const { subnet, address } = freshNetwork();
    const claim = (from: string) => relayPost(from, '/admin/claim', { token: `rct_${randomBytes(32).toString('base64url')}`, email: uniqueEmail('claimant'), password: PASSWORD });
    const statuses: number[] = [];
    for (let i = 0; i < PER_CLIENT; i++) statuses.push((await claim(address(i))).status);
    expect(statuses).toEqual(Array(PER_CLIENT).fill(404));
    const limited = await claim(address(PER_CLIENT));
    expect(limited.status).toBe(429);
    expect(await limited.json()).toEqual({ message: 'ThrottlerException: Too Many Requests', statusCode: 429 });
    expect((await claim(subnet(2)(0))).status).toBe(404);
  });

  it("the query endpoint's authentication", async () => {
    const { subnet, address } = freshNetwork();
    const statuses: number[] = [];
    // FAILED_AUTH_PER_MINUTE (10) failures, and the one that finds the bucket empty.
    for (let i = 0; i < 11; i++) statuses.push((await query(address(i), `guess-${i}`)).status);
    expect(statuses).toEqual(Array(11).fill(403));
    // Held off: even the right password, from yet another address of the /64, is not looked at.
    const heldOff = await query(address(11), QUERY_PASSWORD);
    expect(heldOff.status).toBe(429);
    expect(Number(heldOff.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await query(subnet(2)(0), QUERY_PASSWORD)).status).toBe(200);
  });
});

describe('sign-in is locked out per account, wherever the guesses come from', () => {
  it('console: after the threshold even the right password gets 429, the same for an unknown email; other accounts sign in', async () => {
    const target = await account();
    const unknown = uniqueEmail('nobody');
    for (const email of [target, unknown]) {
      const statuses: number[] = [];
      // One guess from each of many /64s: no per-client limit is reached.
      for (let i = 0; i < FAILURES; i++) statuses.push((await consoleSignIn(lone(), email, `guess-${i}`)).status);
      expect(statuses).toEqual(Array(FAILURES).fill(401));
    }
    const locked = await consoleSignIn(lone(), target, PASSWORD);
    const lockedUnknown = await consoleSignIn(lone(), unknown, PASSWORD);
    for (const response of [locked, lockedUnknown]) {
      expect(response.status).toBe(429);
      const retryAfter = Number(response.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60); // the first lockout: SLUICE_SIGN_IN_LOCKOUT_SECONDS
      expect(response.headers.get('set-cookie')).toBeNull();
    }
    expect(await locked.json()).toEqual(await lockedUnknown.json());
    // The lockout is the account's, across front ends: the relay refuses it too.
    const relayLocked = await relayPost(lone(), '/admin/login', { email: target.toUpperCase(), password: PASSWORD });
    expect(relayLocked.status).toBe(429);
    expect(await relayLocked.json()).toEqual({ message: 'ThrottlerException: Too Many Requests', statusCode: 429 });
    const other = await account();
    expect((await consoleSignIn(lone(), other, PASSWORD)).status).toBe(200);
  });

  it('relay: after the threshold even the right password gets 429; other accounts sign in', async () => {
    const target = await account();
    const statuses: number[] = [];
    for (let i = 0; i < FAILURES; i++) statuses.push((await relayPost(lone(), '/admin/login', { email: target, password: `guess-${i}` })).status);
    expect(statuses).toEqual(Array(FAILURES).fill(401));
    const locked = await relayPost(lone(), '/admin/login', { email: target, password: PASSWORD });
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await locked.json()).toEqual({ message: 'ThrottlerException: Too Many Requests', statusCode: 429 });
    expect((await consoleSignIn(lone(), target, PASSWORD)).status).toBe(429);
    const other = await account();
    expect((await relayPost(lone(), '/admin/login', { email: other, password: PASSWORD })).status).toBe(200);
    // Operators see the refusals (at least these two; other cases of the file add theirs).
    const metrics = await (await fetch(`${app.baseUrl}/metrics`)).text();
    expect(Number(/^sluice_sign_in_locked_out_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2);
  });

  it('a right password clears the count: a user who mistypes now and then is never locked out', async () => {
    const target = await account();
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < FAILURES - 1; i++) expect((await relayPost(lone(), '/admin/login', { email: target, password: 'typo' })).status).toBe(401);
      expect((await consoleSignIn(lone(), target, PASSWORD)).status).toBe(200);
    }
  });
});

describe("one's own password change counts its wrong current passwords in the account's lockout", () => {
  const change = (currentPassword: string) => ({ currentPassword, newPassword: 'a brand new long password' });

  it('console: after the threshold even the right current password gets 429, as a locked sign-in does', async () => {
    const target = await account();
    const session = new ConsoleClient(app.console!.url);
    await session.signIn(target, PASSWORD, { 'x-forwarded-for': lone() });
    const statuses: number[] = [];
    for (let i = 0; i < FAILURES; i++) statuses.push((await session.call('/api/me/password', { method: 'POST', body: change(`guess-${i}`) })).status);
    expect(statuses).toEqual(Array(FAILURES).fill(403));
    const locked = await session.call('/api/me/password', { method: 'POST', body: change(PASSWORD) });
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(locked.headers.get('set-cookie')).toBeNull();
    expect(await locked.json()).toEqual({ message: 'Too many sign-in attempts: try again later', statusCode: 429 });
    // The same lockout as sign-in's, on both front ends.
    expect((await consoleSignIn(lone(), target, PASSWORD)).status).toBe(429);
    expect((await relayPost(lone(), '/admin/login', { email: target, password: PASSWORD })).status).toBe(429);
  });

  it('relay: after the threshold even the right current password gets 429, as a locked login does', async () => {
    const target = await account();
    const login = await relayPost(lone(), '/admin/login', { email: target, password: PASSWORD });
    expect(login.status).toBe(200);
    const { token } = await login.json() as { token: string };
    const changePassword = (currentPassword: string) => fetch(`${relayBase}/admin/me/password`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(change(currentPassword)),
    });
    const statuses: number[] = [];
    for (let i = 0; i < FAILURES; i++) statuses.push((await changePassword(`guess-${i}`)).status);
    expect(statuses).toEqual(Array(FAILURES).fill(401));
    const locked = await changePassword(PASSWORD);
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await locked.json()).toEqual({ message: 'ThrottlerException: Too Many Requests', statusCode: 429 });
    expect((await relayPost(lone(), '/admin/login', { email: target, password: PASSWORD })).status).toBe(429);
    expect((await consoleSignIn(lone(), target, PASSWORD)).status).toBe(429);
  });

  it('a right current password clears the count, as a right sign-in does', async () => {
    const target = await account();
    const session = new ConsoleClient(app.console!.url);
    await session.signIn(target, PASSWORD, { 'x-forwarded-for': lone() });
    for (let i = 0; i < FAILURES - 1; i++) expect((await session.call('/api/me/password', { method: 'POST', body: change('typo') })).status).toBe(403);
    expect((await session.call('/api/me/password', { method: 'POST', body: change(PASSWORD) })).status).toBe(200);
    for (let i = 0; i < FAILURES - 1; i++) expect((await relayPost(lone(), '/admin/login', { email: target, password: 'typo' })).status).toBe(401);
    expect((await relayPost(lone(), '/admin/login', { email: target, password: change('').newPassword })).status).toBe(200);
  });
});
