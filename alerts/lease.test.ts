import { describe, expect, it } from 'vitest';
import { storeFixtures } from './fixture.ts';
import { Lease } from './lease.ts';

const TTL = 90_000;
const fresh = storeFixtures();
async function setup() {
  const fixture = await fresh();
  const lease = (holder: string, name = 'alert evaluator') => new Lease(fixture.store, name, holder, TTL, fixture.clock.now);
  return { ...fixture, a: lease('process-a'), b: lease('process-b'), lease };
}

describe('Lease', () => {
  it('is held by one holder at a time, which renews it', async () => {
    const { a, b, clock } = await setup();
    expect(await a.tryHold()).toBe(true);
    expect(await b.tryHold()).toBe(false);
    // Renewing moves the expiry: a keeps it past the first ttl as long as it renews.
    clock.advance(TTL - 1);
    expect(await a.tryHold()).toBe(true);
    clock.advance(TTL - 1);
    expect(await b.tryHold()).toBe(false);
    expect(await a.tryHold()).toBe(true);
  });

  it('passes to another holder once the holder stops renewing and its ttl runs out', async () => {
    const { a, b, clock } = await setup();
    expect(await a.tryHold()).toBe(true);
    clock.advance(TTL - 1);
    expect(await b.tryHold()).toBe(false);
    clock.advance(1);
    expect(await b.tryHold()).toBe(true);
    // The old holder, back, does not have it any more.
    expect(await a.tryHold()).toBe(false);
  });

  it('is free at once when released, and a release by a holder that does not have it frees nothing', async () => {
    const { a, b } = await setup();
    expect(await a.tryHold()).toBe(true);
    await b.release();
    expect(await b.tryHold()).toBe(false);
    await a.release();
    expect(await b.tryHold()).toBe(true);
    expect(await a.tryHold()).toBe(false);
  });

  it('goes to exactly one of several holders asking at once', async () => {
    const { lease } = await setup();
    const holders = ['p1', 'p2', 'p3', 'p4'].map((holder) => lease(holder));
    const answers = await Promise.all(holders.map((h) => h.tryHold()));
    expect(answers.filter(Boolean)).toHaveLength(1);
  });

  it('is one per name, and an unreadable record guards nothing', async () => {
    const { a, lease, store } = await setup();
    expect(await a.tryHold()).toBe(true);
    expect(await lease('process-b', 'another job').tryHold()).toBe(true);
    await store.put('leases', 'broken', { holder: 42 });
    expect(await lease('process-b', 'broken').tryHold()).toBe(true);
  });
});
