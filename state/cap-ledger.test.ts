/** CapLedger over the embedded store: what a full ledger frees when rebuilt, and settling a place. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CapLedger, type MemberState, UNSEEN_PLACE_GRACE_MS } from './cap-ledger.ts';
import { LocalStateStore } from './local.ts';

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function setup() {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-cap-ledger-'));
  dirs.push(dir);
  let now = Date.parse('2026-11-22T12:00:00Z');
  const store = new LocalStateStore(dir, () => now);
  await store.start();
  const ledger = new CapLedger(store, () => now);
  /** What the store holds of the scope's members, as the test says. */
  const members = new Map<string, MemberState>();
  const claim = (id: string, until?: number) => ledger.claim('scope', id, {
    cap: 2,
    members: async () => members,
    ...(until === undefined ? {} : { until }),
    refuse: (cap) => new Error(`full at ${cap}`),
  });
  return { store, ledger, members, claim, clock: () => now, advance: (ms: number) => { now += ms; } };
}

describe('CapLedger', () => {
  it('keeps a place whose member the store does not show yet for the grace period, then frees it', async () => {
    const { members, claim, advance } = await setup();
    await claim('a');
    await claim('b');
    members.set('a', { ended: false });
    // b's member was never written (its writer failed after the claim): held at first…
    await expect(claim('c')).rejects.toThrow('full at 2');
    advance(UNSEEN_PLACE_GRACE_MS);
    // …and freed once the grace has passed.
    await claim('c');
    members.set('c', { ended: false });
    await expect(claim('d')).rejects.toThrow('full at 2');
  });

  it('frees an ended member at once, and a place at its deadline', async () => {
    const { members, claim, clock, advance } = await setup();
    await claim('a');
    await claim('b', clock() + 1000);
    members.set('a', { ended: false }).set('b', { ended: false, until: clock() + 1000 });
    await expect(claim('c')).rejects.toThrow('full at 2');
    members.set('a', { ended: true });
    await claim('c');
    advance(1000);
    await claim('d');
  });

  it('settles a place only before its deadline', async () => {
    const { ledger, claim, clock, advance } = await setup();
    await claim('a', clock() + 1000);
    await claim('b', clock() + 1000);
    expect(await ledger.settle('scope', 'a')).toBe(true);
    expect(await ledger.settle('scope', 'nope')).toBe(false);
    advance(1000);
    expect(await ledger.settle('scope', 'b')).toBe(false);
    // a holds for good: one place left.
    await claim('c');
    await expect(claim('d')).rejects.toThrow('full at 2');
  });

  it('rebuilds a ledger it cannot read from the members', async () => {
    const { store, members, claim } = await setup();
    members.set('a', { ended: false }).set('b', { ended: false });
    await store.put('cap_ledgers', 'scope', 'not a ledger');
    await expect(claim('c')).rejects.toThrow('full at 2');
    members.set('b', { ended: true });
    await claim('c');
  });
});
