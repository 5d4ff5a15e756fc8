/**
 * Handovers on a real local state store with a clock of the test's: claims expire in the store
 * by themselves, and racing redemptions of one tenant's claims make one owner.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { User } from '../accounts/index.ts';
import { LocalStateStore } from '../state/local.ts';
import { CLAIM_TTL_HOURS, Handovers, type HandoverAccounts } from './handover.ts';

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** A tenant with one owner, in memory: what a handover reads and changes. */
function accounts() {
  const users: User[] = [{ id: 'usr_agency', tenantId: 'ten_1', role: 'owner', active: true } as User];
  const doubles: HandoverAccounts = {
    activeOwners: (tenantId) => users.filter((u) => u.tenantId === tenantId && u.role === 'owner' && u.active),
    tenantExists: (tenantId) => tenantId === 'ten_1',
    emailTaken: (tenantId, email) => users.some((u) => u.tenantId === tenantId && u.email === email),
    createOwner: async (tenantId, { email }) => {
      const user = { id: `usr_${users.length}`, tenantId, email, role: 'owner', active: true } as User;
      users.push(user);
      return user;
    },
    demoteToAdmin: async (userId) => {
      const user = users.find((u) => u.id === userId)!;
      user.role = 'admin';
    },
  };
  return { users, doubles };
}

async function store(now: () => number) {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-handover-'));
  dirs.push(dir);
  const state = new LocalStateStore(dir, now);
  await state.start();
  return state;
}

describe('Handovers', () => {
  it('claims expire in the store after CLAIM_TTL_HOURS: not listed, not redeemable, gone from the bucket', async () => {
    let clock = Date.parse('2026-11-28T00:00:00Z');
    const state = await store(() => clock);
    const handovers = new Handovers(state, accounts().doubles, () => clock);
    const { claimToken } = await handovers.create('ten_1', 'usr_agency');
    expect(await handovers.list('ten_1')).toHaveLength(1);
    clock += CLAIM_TTL_HOURS * 3600_000 + 1000;
    expect(await handovers.list('ten_1')).toEqual([]);
    expect(await state.list('relay_claims')).toEqual([]);
    await expect(handovers.redeem(claimToken, { email: 'c@client.test', name: '', password: 'x' })).rejects.toThrow('Claim token not found or expired');
    await state.shutdown();
  });

  it('of two claims redeemed at once, one wins: one new owner, the other refused', async () => {
    const state = await store(Date.now);
    const { users, doubles } = accounts();
    const handovers = new Handovers(state, doubles);
    const [a, b] = [await handovers.create('ten_1', 'usr_agency'), await handovers.create('ten_1', 'usr_agency')];
    const outcomes = await Promise.allSettled([
      handovers.redeem(a.claimToken, { email: 'a@client.test', name: '', password: 'x' }),
      handovers.redeem(b.claimToken, { email: 'b@client.test', name: '', password: 'x' }),
    ]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(users.filter((u) => u.role === 'owner')).toHaveLength(1);
    expect(await handovers.list('ten_1')).toEqual([]);
    await state.shutdown();
  });
});
