/**
 * Idempotency records on the local state store with an injected clock: the replay window, the
 * lease that frees a key whose request died, release after a failure, scopes, fingerprints.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { LocalStateStore } from '../state/local.ts';
import { RelayError } from './errors.ts';
import { fingerprint, Idempotency, idempotencyKey, REPLAY_WINDOW_MS, type Claim } from './idempotency.ts';

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

let now = 1_800_000_000_000;
let idempotency: Idempotency;
const LEASE = 60_000;

beforeEach(async () => {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-idem-'));
  dirs.push(dir);
  const state = new LocalStateStore(dir, () => now);
  await state.start();
  idempotency = new Idempotency(state, { leaseMs: LEASE, now: () => now });
});

async function claim(scope: string, key: string, print: string): Promise<Claim> {
  const start = await idempotency.begin(scope, key, print);
  if (start.kind !== 'run') throw new Error(`expected to run, got ${start.kind}`);
  return start.claim;
}

async function refusal(promise: Promise<unknown>): Promise<[number, string]> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  if (!(err instanceof RelayError)) throw new Error(`expected a RelayError, got ${String(err)}`);
  return [err.statusCode, err.message];
}

describe('Idempotency', () => {
  it('replays the stored answer for the same key and body, within the window only', async () => {
    const first = await claim('s', 'key-0001', 'A');
    await first.finish({ status: 201, body: '{"id":1}' });
    now += REPLAY_WINDOW_MS - 1;
    expect(await idempotency.begin('s', 'key-0001', 'A')).toEqual({ kind: 'replay', response: { status: 201, body: '{"id":1}' } });
    now += 1;
    // 24 hours after the first use the key starts afresh, with any body.
    expect((await idempotency.begin('s', 'key-0001', 'B')).kind).toBe('run');
  });

  it('answers 409 while the first request runs, and 422 for another body, running or done', async () => {
    const first = await claim('s', 'key-0002', 'A');
    expect(await refusal(idempotency.begin('s', 'key-0002', 'A'))).toEqual([409, 'A request with this Idempotency-Key is already in progress. Retry shortly.']);
    expect(await refusal(idempotency.begin('s', 'key-0002', 'B'))).toEqual([422, 'Idempotency-Key has already been used with a different request body']);
    await first.finish({ status: 201, body: '{}' });
    expect(await refusal(idempotency.begin('s', 'key-0002', 'B'))).toEqual([422, 'Idempotency-Key has already been used with a different request body']);
  });

  it('frees a key whose request failed, so a retry runs anew', async () => {
    const first = await claim('s', 'key-0003', 'A');
    await first.release();
    const retry = await claim('s', 'key-0003', 'A');
    await retry.finish({ status: 201, body: '{"retry":true}' });
    expect(await idempotency.begin('s', 'key-0003', 'A')).toMatchObject({ kind: 'replay', response: { body: '{"retry":true}' } });
  });

  it('is never wedged by a request that died holding the key: the lease runs out', async () => {
    const dead = await claim('s', 'key-0004', 'A'); // the process dies here: no finish, no release
    now += LEASE - 1;
    expect((await refusal(idempotency.begin('s', 'key-0004', 'A')))[0]).toBe(409);
    now += 1;
    const taken = await claim('s', 'key-0004', 'A');
    // The dead request, were it to come back, can no longer store its answer over the new one.
    await dead.finish({ status: 201, body: '{"stale":true}' });
    await taken.finish({ status: 201, body: '{"fresh":true}' });
    expect(await idempotency.begin('s', 'key-0004', 'A')).toMatchObject({ kind: 'replay', response: { body: '{"fresh":true}' } });
  });

  it('stops work from starting once half the lease is gone', async () => {
    const slow = await claim('s', 'key-0005', 'A');
    expect(slow.holds()).toBe(true);
    now += LEASE / 2;
    expect(slow.holds()).toBe(false);
  });

  it('keeps scopes apart: one key in two scopes is two requests', async () => {
    await (await claim('site-1', 'shared-key', 'A')).finish({ status: 201, body: '1' });
    expect((await idempotency.begin('site-2', 'shared-key', 'B')).kind).toBe('run');
  });

  it('lets exactly one of many simultaneous requests with one key run', async () => {
    const starts = await Promise.allSettled(Array.from({ length: 20 }, () => idempotency.begin('s', 'key-race', 'A')));
    expect(starts.filter((s) => s.status === 'fulfilled' && s.value.kind === 'run')).toHaveLength(1);
    expect(starts.filter((s) => s.status === 'rejected' && (s.reason as RelayError).statusCode === 409)).toHaveLength(19);
  });
});

describe('the header and the fingerprint', () => {
  it('takes keys of 8 to 255 characters', () => {
    expect(idempotencyKey(undefined)).toBeUndefined();
    expect(idempotencyKey('12345678')).toBe('12345678');
    expect(idempotencyKey('k'.repeat(255))).toBe('k'.repeat(255));
    for (const bad of ['', '1234567', 'k'.repeat(256)]) {
      expect(() => idempotencyKey(bad)).toThrow('Idempotency-Key must be between 8 and 255 characters');
    }
  });

  it('fingerprints a body by content: key order does not matter, values do', () => {
    expect(fingerprint({ a: 1, b: { c: [1, 2], d: 'x' } })).toBe(fingerprint({ b: { d: 'x', c: [1, 2] }, a: 1 }));
    expect(fingerprint({ a: 1 })).not.toBe(fingerprint({ a: '1' }));
    expect(fingerprint({ list: [1, 2] })).not.toBe(fingerprint({ list: [2, 1] }));
  });
});
