import { describe, expect, it } from 'vitest';
import { storeFixtures, testRule } from './fixture.ts';
import { MAX_SILENCE_MS, MAX_SILENCES_PER_TENANT, Silences, silenceMatches } from './silences.ts';

const HOUR = 3600_000;
const fresh = storeFixtures();
async function setup() {
  const fixture = await fresh();
  return { ...fixture, silences: new Silences(fixture.store, fixture.clock.now) };
}

const db = testRule({ id: 'alr_00000000000000db', labels: { team: 'db', env: 'prod' } });
const web = testRule({ id: 'alr_0000000000000eb0', labels: { team: 'web', env: 'prod' } });

describe('Silences', () => {
  it('matches a rule by its id, or by every one of its labels, and both when it names both', async () => {
    const { silences, clock } = await setup();
    const until = clock.now() + HOUR;
    const byId = await silences.create('tnt_a', 'usr_1', { ruleId: db.id, endsAt: until, comment: 'migration' });
    expect(byId).toMatchObject({ tenantId: 'tnt_a', ruleId: db.id, endsAt: until, comment: 'migration', createdBy: 'usr_1', createdAt: clock.now() });
    expect(byId.id).toMatch(/^sil_[0-9a-f]{16}$/);
    expect(silenceMatches(byId, db, clock.now())).toBe(true);
    expect(silenceMatches(byId, web, clock.now())).toBe(false);

    const byLabels = { ...byId, ruleId: undefined, labels: { team: 'web', env: 'prod' } };
    expect(silenceMatches(byLabels, web, clock.now())).toBe(true);
    expect(silenceMatches(byLabels, db, clock.now())).toBe(false);
    expect(silenceMatches({ ...byLabels, labels: { team: 'web' } }, web, clock.now())).toBe(true);
    expect(silenceMatches({ ...byLabels, labels: { team: 'web', region: 'eu' } }, web, clock.now())).toBe(false);
    expect(silenceMatches({ ...byLabels, labels: { constructor: 'x' } }, web, clock.now())).toBe(false);
    expect(silenceMatches({ ...byLabels, ruleId: db.id }, web, clock.now())).toBe(false);
    expect(silenceMatches({ ...byLabels, ruleId: web.id }, web, clock.now())).toBe(true);

    expect(await silences.silences(db, clock.now())).toBe(true);
    expect(await silences.silences(web, clock.now())).toBe(false);
  });

  it("never matches another tenant's rule, nor shows in its list", async () => {
    const { silences, clock } = await setup();
    await silences.create('tnt_b', 'usr_2', { labels: { team: 'db' }, endsAt: clock.now() + HOUR, comment: 'theirs' });
    expect(await silences.silences(db, clock.now())).toBe(false);
    expect(await silences.list('tnt_a')).toEqual([]);
    expect(await silences.list('tnt_b')).toHaveLength(1);
  });

  it('matches nothing once ended, lists only running ones, and is dropped after the longest a silence may run', async () => {
    const { silences, clock, store } = await setup();
    const short = await silences.create('tnt_a', 'usr_1', { labels: { team: 'db' }, endsAt: clock.now() + HOUR, comment: 'short' });
    const long = await silences.create('tnt_a', 'usr_1', { labels: { team: 'web' }, endsAt: clock.now() + 2 * HOUR, comment: 'long' });
    expect((await silences.list('tnt_a')).map((s) => s.id)).toEqual([short.id, long.id]);
    clock.advance(HOUR);
    expect(await silences.silences(db, clock.now())).toBe(false);
    expect(await silences.silences(web, clock.now())).toBe(true);
    expect((await silences.list('tnt_a')).map((s) => s.id)).toEqual([long.id]);
    clock.advance(MAX_SILENCE_MS + 24 * HOUR);
    expect(await store.list('alert_silences')).toEqual([]);
  });

  it('expires a silence at once; expiring it again changes nothing; another tenant cannot', async () => {
    const { silences, clock } = await setup();
    const silence = await silences.create('tnt_a', 'usr_1', { ruleId: db.id, endsAt: clock.now() + HOUR, comment: 'deploy' });
    await expect(silences.expire('tnt_b', silence.id)).rejects.toMatchObject({ statusCode: 404, message: 'Silence not found' });
    expect(await silences.silences(db, clock.now())).toBe(true);
    await silences.expire('tnt_a', silence.id);
    expect(await silences.silences(db, clock.now())).toBe(false);
    expect(await silences.list('tnt_a')).toEqual([]);
    await silences.expire('tnt_a', silence.id);
    await expect(silences.expire('tnt_a', 'sil_ffffffffffffffff')).rejects.toMatchObject({ statusCode: 404 });
  });

  const bad: Array<[string, (now: number) => unknown, string]> = [
    ['an end in the past', (now) => ({ ruleId: db.id, endsAt: now, comment: 'x' }), 'endsAt'],
    ['an end over 30 days away', (now) => ({ ruleId: db.id, endsAt: now + MAX_SILENCE_MS + 1, comment: 'x' }), 'endsAt'],
    ['no rule and no labels', (now) => ({ labels: {}, endsAt: now + HOUR, comment: 'everything' }), 'ruleId'],
    ['no comment', (now) => ({ ruleId: db.id, endsAt: now + HOUR }), 'comment'],
    ['a rule id that is not one', (now) => ({ ruleId: 'dashboard', endsAt: now + HOUR, comment: 'x' }), 'ruleId'],
    ['a label key that is not a name', (now) => ({ labels: { 'a b': 'x' }, endsAt: now + HOUR, comment: 'x' }), 'labels["a b"]'],
  ];
  for (const [name, body, field] of bad) {
    it(`refuses ${name} with 400 naming ${field}`, async () => {
      const { silences, clock } = await setup();
      await expect(silences.create('tnt_a', 'usr_1', body(clock.now()) as never)).rejects.toMatchObject({ statusCode: 400, details: { field } });
      expect(await silences.list('tnt_a')).toEqual([]);
    });
  }

  it(`keeps at most ${MAX_SILENCES_PER_TENANT} running silences per tenant; an ended one frees its place`, async () => {
    const { silences, clock } = await setup();
    for (let i = 0; i < MAX_SILENCES_PER_TENANT - 1; i++) await silences.create('tnt_a', 'usr_1', { ruleId: db.id, endsAt: clock.now() + 2 * HOUR, comment: `${i}` });
    await silences.create('tnt_a', 'usr_1', { ruleId: db.id, endsAt: clock.now() + HOUR, comment: 'ends first' });
    await expect(silences.create('tnt_a', 'usr_1', { ruleId: db.id, endsAt: clock.now() + HOUR, comment: 'one too many' })).rejects.toMatchObject({ statusCode: 409 });
    await silences.create('tnt_b', 'usr_2', { ruleId: db.id, endsAt: clock.now() + HOUR, comment: 'other tenant' });
    clock.advance(HOUR);
    await silences.create('tnt_a', 'usr_1', { ruleId: db.id, endsAt: clock.now() + HOUR, comment: 'in its place' });
    expect(await silences.list('tnt_a')).toHaveLength(MAX_SILENCES_PER_TENANT);
  });
});
