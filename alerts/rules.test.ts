import { describe, expect, it } from 'vitest';
import { UNSEEN_PLACE_GRACE_MS } from '../state/cap-ledger.ts';
import { racingStore, ruleFields, storeFixtures } from './fixture.ts';
import { AlertRules, MAX_RULES_PER_TENANT, validateRuleFields } from './rules.ts';

const fresh = storeFixtures();
async function setup() {
  const fixture = await fresh();
  return { ...fixture, rules: new AlertRules(fixture.store, fixture.clock.now) };
}

const refusal = (body: unknown) => {
  try {
    validateRuleFields(body);
  } catch (err) {
    return err as { statusCode: number; message: string; details: { field: string } };
  }
  throw new Error('accepted');
};

describe('validateRuleFields', () => {
  it('takes a minimal body and fills in the defaults', () => {
    const body = { name: 'slow checkout', condition: { kind: 'latency', service: 'checkout', percentile: 95 }, comparator: 'above', threshold: 800, windowSeconds: 600 };
    expect(validateRuleFields(body)).toEqual({ ...body, forSeconds: 0, noData: 'ok', labels: {}, repeatSeconds: 0, enabled: true });
    // The caller's body is not changed.
    expect(body).not.toHaveProperty('labels');
  });

  it('takes every kind of condition', () => {
    const conditions = [
      { kind: 'metric', query: { name: 'http.server.duration', kind: 'histogram', aggregation: 'p99', services: ['api'], attributes: [{ key: 'route', value: '/pay' }] } },
      { kind: 'log_count', text: 'timeout', services: ['api'], minSeverity: 17, attributes: [{ key: 'user', value: 'u1' }] },
      { kind: 'error_rate', service: 'api' },
      { kind: 'latency', service: 'api', percentile: 50 },
      { kind: 'deploy_regression' },
      { kind: 'deploy_regression', service: 'api' },
    ];
    for (const condition of conditions) expect(validateRuleFields(ruleFields({ condition } as never)).condition).toEqual(condition);
    expect(validateRuleFields(ruleFields({ notify: { siteId: 'site_1', formId: 'frm_1' }, repeatSeconds: 300, labels: { team: 'payments' } }))).toMatchObject({ repeatSeconds: 300 });
  });

  const bad: Array<[string, unknown, string]> = [
    ['no body', null, 'name'],
    ['a blank name', { ...ruleFields(), name: '   ' }, 'name'],
    ['an unknown field', { ...ruleFields(), severity: 'high' }, 'severity'],
    ['an unknown condition kind', ruleFields({ condition: { kind: 'cpu' } as never }), 'condition.kind'],
    ['a condition without its kind', ruleFields({ condition: { service: 'api' } as never }), 'condition.kind'],
    ['an error rate without its service', ruleFields({ condition: { kind: 'error_rate' } as never }), 'condition.service'],
    ['a percentile latency does not offer', ruleFields({ condition: { kind: 'latency', service: 'api', percentile: 90 } as never }), 'condition.percentile'],
    ['a metric aggregation that does not exist', ruleFields({ condition: { kind: 'metric', query: { name: 'm', kind: 'gauge', aggregation: 'median' } } as never }), 'condition.query.aggregation'],
    ['a field of another condition kind', ruleFields({ condition: { kind: 'error_rate', service: 'api', percentile: 95 } as never }), 'condition.percentile'],
    ['an unknown comparator', ruleFields({ comparator: 'equals' as never }), 'comparator'],
    ['a threshold that is not a number', ruleFields({ threshold: '5' as never }), 'threshold'],
    ['a window under a minute', ruleFields({ windowSeconds: 59 }), 'windowSeconds'],
    ['a window over a day', ruleFields({ windowSeconds: 86_401 }), 'windowSeconds'],
    ['a fractional window', ruleFields({ windowSeconds: 60.5 }), 'windowSeconds'],
    ['a negative for-duration', ruleFields({ forSeconds: -1 }), 'forSeconds'],
    ['an unknown no-data policy', ruleFields({ noData: 'alerting' as never }), 'noData'],
    ['a label key that is not a name', ruleFields({ labels: { 'team-name': 'x' } }), 'labels["team-name"]'],
    ['a label key over 64 characters', ruleFields({ labels: { [`k${'x'.repeat(64)}`]: 'x' } }), `labels["k${'x'.repeat(39)}…"]`],
    ['a label value over 256 characters', ruleFields({ labels: { team: 'x'.repeat(257) } }), 'labels.team'],
    ['21 labels', ruleFields({ labels: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`l${i}`, 'x'])) }), 'labels'],
    ['a notify target without its form', ruleFields({ notify: { siteId: 'site_1' } as never }), 'notify.formId'],
    ['a reminder more often than every 5 minutes', ruleFields({ repeatSeconds: 299 }), 'repeatSeconds'],
    ['a reminder less often than weekly', ruleFields({ repeatSeconds: 604_801 }), 'repeatSeconds'],
    ['enabled as a string', ruleFields({ enabled: 'yes' as never }), 'enabled'],
  ];
  for (const [name, body, field] of bad) {
    it(`refuses ${name} with 400 naming ${field}`, () => {
      const err = refusal(body);
      expect(err.statusCode).toBe(400);
      expect(err.details.field).toBe(field);
      expect(err.message).toContain(field);
    });
  }
});

describe('AlertRules', () => {
  it('creates, lists, gets, replaces and removes a tenant\'s rules', async () => {
    const { rules, clock } = await setup();
    const created = await rules.create('tnt_a', ruleFields({ name: 'b rule' }));
    expect(created).toMatchObject({ tenantId: 'tnt_a', name: 'b rule', createdAt: clock.now(), updatedAt: clock.now() });
    expect(created.id).toMatch(/^alr_[0-9a-f]{16}$/);
    const other = await rules.create('tnt_a', ruleFields({ name: 'a rule' }));
    expect((await rules.list('tnt_a')).map((r) => r.name)).toEqual(['a rule', 'b rule']);
    expect(await rules.get('tnt_a', created.id)).toEqual(created);

    clock.advance(5_000);
    const replaced = await rules.replace('tnt_a', created.id, ruleFields({ name: 'b rule', threshold: 0.2 }));
    expect(replaced).toMatchObject({ id: created.id, threshold: 0.2, createdAt: created.createdAt, updatedAt: clock.now() });
    expect(await rules.get('tnt_a', created.id)).toEqual(replaced);

    await rules.remove('tnt_a', other.id);
    expect((await rules.list('tnt_a')).map((r) => r.id)).toEqual([created.id]);
  });

  it('validates what it stores, whoever calls it', async () => {
    const { rules } = await setup();
    await expect(rules.create('tnt_a', ruleFields({ windowSeconds: 10 }))).rejects.toMatchObject({ statusCode: 400, details: { field: 'windowSeconds' } });
    expect(await rules.all()).toEqual([]);
  });

  it("treats another tenant's rule as not found, for every operation", async () => {
    const { rules } = await setup();
    const mine = await rules.create('tnt_a', ruleFields());
    const notFound = { statusCode: 404, message: 'Alert rule not found' };
    await expect(rules.get('tnt_b', mine.id)).rejects.toMatchObject(notFound);
    await expect(rules.replace('tnt_b', mine.id, ruleFields({ name: 'taken' }))).rejects.toMatchObject(notFound);
    await expect(rules.remove('tnt_b', mine.id)).rejects.toMatchObject(notFound);
    await expect(rules.get('tnt_a', 'alr_ffffffffffffffff')).rejects.toMatchObject(notFound);
    expect(await rules.list('tnt_b')).toEqual([]);
    expect(await rules.get('tnt_a', mine.id)).toEqual(mine);
    await rules.create('tnt_b', ruleFields());
    expect((await rules.all()).map((r) => r.tenantId).sort()).toEqual(['tnt_a', 'tnt_b']);
  });

  it(`keeps at most ${MAX_RULES_PER_TENANT} rules per tenant (409), per tenant, and frees a place when one is removed`, async () => {
    const { rules, clock } = await setup();
    const created = [];
    for (let i = 0; i < MAX_RULES_PER_TENANT; i++) created.push(await rules.create('tnt_a', ruleFields({ name: `rule ${i}` })));
    await expect(rules.create('tnt_a', ruleFields())).rejects.toMatchObject({ statusCode: 409 });
    await rules.create('tnt_b', ruleFields());
    await rules.remove('tnt_a', created[0]!.id);
    // The ledger keeps a place taken within the last minute (its rule may not be visible yet): past that, it is free.
    clock.advance(UNSEEN_PLACE_GRACE_MS);
    await rules.create('tnt_a', ruleFields({ name: 'in its place' }));
    expect(await rules.list('tnt_a')).toHaveLength(MAX_RULES_PER_TENANT);
  });

  it('keeps the cap when two creates race for the last place', async () => {
    const { rules } = await setup();
    for (let i = 0; i < MAX_RULES_PER_TENANT - 1; i++) await rules.create('tnt_a', ruleFields());
    const results = await Promise.allSettled([rules.create('tnt_a', ruleFields()), rules.create('tnt_a', ruleFields())]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(await rules.list('tnt_a')).toHaveLength(MAX_RULES_PER_TENANT);
  });

  it('replaces by compare-and-set: an edit that lands between its read and its write makes it read again, and it lands whole', async () => {
    const { store, clock } = await setup();
    const rule = await new AlertRules(store, clock.now).create('tnt_a', ruleFields({ name: 'original' }));
    // Someone else renames it between this replace's read and its write: the replace reads again and then writes.
    const raced = new AlertRules(racingStore(store, rule.id, () => new AlertRules(store).replace('tnt_a', rule.id, ruleFields({ name: 'theirs' }))), clock.now);
    await raced.replace('tnt_a', rule.id, ruleFields({ name: 'mine', threshold: 0.5 }));
    expect(await new AlertRules(store).get('tnt_a', rule.id)).toMatchObject({ name: 'mine', threshold: 0.5, createdAt: rule.createdAt });
  });

  it('does not bring back a rule removed while a replace of it was under way', async () => {
    const { store, clock } = await setup();
    const rule = await new AlertRules(store, clock.now).create('tnt_a', ruleFields());
    const raced = new AlertRules(racingStore(store, rule.id, () => new AlertRules(store).remove('tnt_a', rule.id)), clock.now);
    await expect(raced.replace('tnt_a', rule.id, ruleFields({ name: 'edited' }))).rejects.toMatchObject({ statusCode: 404 });
    expect(await new AlertRules(store).all()).toEqual([]);
  });
});
