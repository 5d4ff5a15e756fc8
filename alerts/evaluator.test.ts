/**
 * The evaluator end to end on a real LocalStateStore, with a fake measure and notify and a clock
 * the test moves: what a tenant is told, and when, through failures and a change of evaluator.
 */
import { describe, expect, it } from 'vitest';
import { derivedUuid } from '../core/hash.ts';
import { AlertEvaluator } from './evaluator.ts';
import type { StateStore } from '../state/store.ts';
import { capturedLogger, racingStore, ruleFields, storeFixtures } from './fixture.ts';
import { Lease } from './lease.ts';
import type { AlertNotification } from './model.ts';
import { AlertRules, type RuleFields } from './rules.ts';
import { Silences } from './silences.ts';

const SECOND = 1000;
const TTL = 90 * SECOND;
const fresh = storeFixtures();

/** The id every process must give the notification of transition `seq` of a rule's status record begun at `startedAt`. */
const expectedId = (ruleId: string, seq: number, startedAt: number) => derivedUuid('alert notification', ruleId, String(startedAt), String(seq));

async function setup(perTenant?: number) {
  const fixture = await fresh();
  const { store, clock } = fixture;
  const rules = new AlertRules(store, clock.now);
  const silences = new Silences(store, clock.now);
  /** What measure answers per rule id: a number, no data (absent), or an error to throw. */
  const values = new Map<string, number | Error>();
  const measured: Array<{ holder: string; ruleId: string; from: number; to: number }> = [];
  const sent: AlertNotification[] = [];
  const { log, lines } = capturedLogger();
  const evaluator = (holder = 'process-a', notify = async (n: AlertNotification) => void sent.push(n), state: StateStore = store) => new AlertEvaluator({
    rules, silences, state, log, notify,
    lease: new Lease(store, 'alert evaluator', holder, TTL, clock.now),
    measure: async (rule, range) => {
      measured.push({ holder, ruleId: rule.id, ...range });
      const value = values.get(rule.id);
      if (value instanceof Error) throw value;
      return value ?? null;
    },
    now: clock.now,
    maxRulesPerTenantPerTick: perTenant,
  });
  const create = (fields: Partial<RuleFields>, tenantId = 'tnt_a') => rules.create(tenantId, ruleFields({ threshold: 10, ...fields }));
  return { ...fixture, rules, silences, values, measured, sent, lines, evaluator, create };
}

describe('AlertEvaluator', () => {
  it('takes a rule from ok through pending to firing (one notification), reminds, and resolves (one notification)', async () => {
    const { clock, values, measured, sent, evaluator, create } = await setup();
    const rule = await create({ forSeconds: 60, repeatSeconds: 300, windowSeconds: 300 });
    const evaluating = evaluator();
    const tickAfter = async (ms: number) => {
      clock.advance(ms);
      await evaluating.tick();
    };

    values.set(rule.id, 5);
    await tickAfter(0);
    expect(measured).toEqual([{ holder: 'process-a', ruleId: rule.id, from: clock.now() - 300 * SECOND, to: clock.now() }]);
    expect(await evaluating.status('tnt_a', rule.id)).toMatchObject({ state: 'ok', value: 5, seq: 0, evaluatedAt: clock.now() });
    const started = (await evaluating.status('tnt_a', rule.id))!.startedAt!;

    values.set(rule.id, 20);
    await tickAfter(30 * SECOND);
    expect(await evaluating.status('tnt_a', rule.id)).toMatchObject({ state: 'pending', since: clock.now() });
    await tickAfter(30 * SECOND);
    expect((await evaluating.status('tnt_a', rule.id))!.state).toBe('pending');
    expect(sent).toEqual([]);
    await tickAfter(30 * SECOND);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ id: expectedId(rule.id, 2, started), rule, transition: { seq: 2, kind: 'firing', from: 'pending', to: 'firing', value: 20 }, status: { state: 'firing' } });

    await tickAfter(30 * SECOND);
    expect(sent).toHaveLength(1);
    await tickAfter(270 * SECOND);
    expect(sent.map((n) => [n.id, n.transition.kind])).toEqual([[expectedId(rule.id, 2, started), 'firing'], [expectedId(rule.id, 3, started), 'repeat']]);

    values.set(rule.id, 5);
    await tickAfter(30 * SECOND);
    await tickAfter(30 * SECOND);
    expect(sent.map((n) => [n.id, n.transition.kind])).toEqual([[expectedId(rule.id, 2, started), 'firing'], [expectedId(rule.id, 3, started), 'repeat'], [expectedId(rule.id, 4, started), 'resolved']]);
    const status = (await evaluating.status('tnt_a', rule.id))!;
    expect(status).toMatchObject({ state: 'ok', seq: 4, notifiedSeq: 4 });
    expect(status.history.map((t) => t.kind)).toEqual(['pending', 'firing', 'repeat', 'resolved']);

    expect((await evaluating.statuses('tnt_a')).map((s) => s.ruleId)).toEqual([rule.id]);
    expect(await evaluating.statuses('tnt_b')).toEqual([]);
    expect(await evaluating.status('tnt_b', rule.id)).toBeUndefined();
  });

  it('holds back the notifications of a silenced rule, and the resolve of a firing nobody was told of', async () => {
    const { clock, values, sent, lines, silences, evaluator, create } = await setup();
    const db = await create({ labels: { team: 'db' } });
    const web = await create({ labels: { team: 'web' } });
    const silence = await silences.create('tnt_a', 'usr_1', { labels: { team: 'db' }, endsAt: clock.now() + 3600 * SECOND, comment: 'migration' });
    const evaluating = evaluator();
    values.set(db.id, 20).set(web.id, 20);
    await evaluating.tick();
    expect(sent.map((n) => n.rule.id)).toEqual([web.id]);
    const held = (await evaluating.status('tnt_a', db.id))!;
    expect(held).toMatchObject({ state: 'firing', notifiedSeq: 1 });
    expect(held.history).toMatchObject([{ kind: 'firing', silenced: true }]);
    expect(lines.some((l) => l.msg === 'alert notification held back by a silence' && l.ruleId === db.id)).toBe(true);

    // The silence ends; the rule resolves: announcing the end of a firing never announced would be noise.
    await silences.expire('tnt_a', silence.id);
    values.set(db.id, 1);
    clock.advance(30 * SECOND);
    await evaluating.tick();
    expect(sent.map((n) => n.rule.id)).toEqual([web.id]);
    expect((await evaluating.status('tnt_a', db.id))!.history.at(-1)).toMatchObject({ kind: 'resolved', silenced: true });

    values.set(db.id, 20);
    clock.advance(30 * SECOND);
    await evaluating.tick();
    expect(sent.map((n) => [n.rule.id, n.transition.kind])).toEqual([[web.id, 'firing'], [db.id, 'firing']]);
  });

  it('changes nothing for a rule whose measure throws, logs it, and goes on with the other rules', async () => {
    const { clock, values, measured, sent, lines, evaluator, create } = await setup();
    const failing = await create({ name: 'failing' });
    const other = await create({ name: 'other' });
    const evaluating = evaluator();
    values.set(failing.id, 20).set(other.id, 5);
    await evaluating.tick();
    const before = await evaluating.status('tnt_a', failing.id);

    values.set(failing.id, new Error('storage unreachable')).set(other.id, 20);
    clock.advance(30 * SECOND);
    await evaluating.tick();
    expect(await evaluating.status('tnt_a', failing.id)).toEqual(before);
    expect(sent.map((n) => n.rule.id)).toEqual([failing.id, other.id]);
    expect(measured.filter((m) => m.ruleId === other.id)).toHaveLength(2);
    expect(lines).toContainEqual(expect.objectContaining({ level: 40, ruleId: failing.id, msg: 'alert rule not evaluated: measuring it failed; its state stays' }));
  });

  it('hands a notification whose notify threw over again next round, under the same id, and piles no reminder behind it', async () => {
    const { clock, values, evaluator, create } = await setup();
    const rule = await create({ repeatSeconds: 300 });
    const attempts: AlertNotification[] = [];
    let failures = 2;
    const evaluating = evaluator('process-a', async (n) => {
      attempts.push(n);
      if (failures-- > 0) throw new Error('delivery queue full');
    });
    values.set(rule.id, 20);
    await evaluating.tick();
    expect((await evaluating.status('tnt_a', rule.id))!).toMatchObject({ state: 'firing', seq: 1, notifiedSeq: 0 });
    const started = (await evaluating.status('tnt_a', rule.id))!.startedAt!;
    // Past the reminder interval while the first notification still waits: still only that one.
    clock.advance(600 * SECOND);
    await evaluating.tick();
    clock.advance(30 * SECOND);
    await evaluating.tick();
    expect(attempts.map((n) => n.id)).toEqual([expectedId(rule.id, 1, started), expectedId(rule.id, 1, started), expectedId(rule.id, 1, started)]);
    expect((await evaluating.status('tnt_a', rule.id))!).toMatchObject({ seq: 1, notifiedSeq: 1, lastNotifiedAt: clock.now() });

    clock.advance(30 * SECOND);
    await evaluating.tick();
    expect(attempts).toHaveLength(3);
    clock.advance(300 * SECOND);
    await evaluating.tick();
    expect(attempts.map((n) => n.transition.kind)).toEqual(['firing', 'firing', 'firing', 'repeat']);
  });

  it('keeps a rule\'s status through edits, leaves a disabled rule alone, and removes the status of a removed rule', async () => {
    const { clock, values, measured, rules, store, evaluator, create } = await setup();
    const rule = await create({});
    const evaluating = evaluator();
    values.set(rule.id, 20);
    await evaluating.tick();
    await rules.replace('tnt_a', rule.id, ruleFields({ threshold: 50, condition: { kind: 'latency', service: 'api', percentile: 99 } }));
    clock.advance(30 * SECOND);
    await evaluating.tick();
    expect((await evaluating.status('tnt_a', rule.id))!.history.map((t) => t.kind)).toEqual(['firing', 'resolved']);

    await rules.replace('tnt_a', rule.id, ruleFields({ threshold: 10, enabled: false }));
    clock.advance(30 * SECOND);
    await evaluating.tick();
    expect(measured).toHaveLength(2);
    expect((await evaluating.status('tnt_a', rule.id))!.seq).toBe(2);

    await rules.remove('tnt_a', rule.id);
    await evaluating.tick();
    expect(await evaluating.status('tnt_a', rule.id)).toBeUndefined();
    expect(await store.list('alert_status')).toEqual([]);
  });

  it("measures at most maxRulesPerTenantPerTick of a tenant's rules a round, tenants interleaved, each tenant's turn going on next round", async () => {
    const { measured, evaluator, create } = await setup(20);
    const busy = [];
    for (let i = 0; i < 50; i++) busy.push(await create({ name: `busy ${i}` }, 'tnt_busy'));
    const quiet = await create({ name: 'quiet' }, 'tnt_quiet');
    const evaluating = evaluator();
    const rounds: string[][] = [];
    for (let round = 0; round < 3; round++) {
      const start = measured.length;
      await evaluating.tick();
      rounds.push(measured.slice(start).map((m) => m.ruleId));
    }
    for (const round of rounds) {
      expect(round).toHaveLength(21);
      expect(new Set(round).size).toBe(21);
      // The quiet tenant's rule is among the first two, not behind the busy tenant's twenty.
      expect(round.indexOf(quiet.id)).toBeLessThanOrEqual(1);
    }
    expect(new Set(rounds.flat())).toEqual(new Set([...busy.map((r) => r.id), quiet.id]));
  });

  it('is run by the lease holder only; a holder that dies is replaced after the ttl, which resends only what was not handed over, under the same id', async () => {
    const { clock, values, measured, evaluator, create } = await setup();
    const rule = await create({});
    const handedOverByA: AlertNotification[] = [];
    const sentByB: AlertNotification[] = [];
    // Process a dies while handing its second notification over: notify never completes for it.
    const a = evaluator('process-a', async (n) => {
      handedOverByA.push(n);
      if (handedOverByA.length > 1) throw new Error('process a killed');
    });
    const b = evaluator('process-b', async (n) => void sentByB.push(n));

    values.set(rule.id, 20);
    await a.tick();
    await b.tick();
    expect(measured.map((m) => m.holder)).toEqual(['process-a']);
    const started = (await a.status('tnt_a', rule.id))!.startedAt!;
    expect(handedOverByA.map((n) => n.id)).toEqual([expectedId(rule.id, 1, started)]);

    values.set(rule.id, 1);
    clock.advance(30 * SECOND);
    await a.tick();
    expect(handedOverByA.map((n) => n.transition.kind)).toEqual(['firing', 'resolved']);
    // a is gone: its tick is never called again, and its lease is not released.
    clock.advance(TTL - 1);
    await b.tick();
    expect(measured.map((m) => m.holder)).toEqual(['process-a', 'process-a']);
    clock.advance(1);
    await b.tick();
    expect(measured.map((m) => m.holder)).toEqual(['process-a', 'process-a', 'process-b']);
    expect(sentByB.map((n) => [n.id, n.transition.kind])).toEqual([[expectedId(rule.id, 2, started), 'resolved']]);
    expect(handedOverByA[1]!.id).toBe(sentByB[0]!.id);
    expect((await b.status('tnt_a', rule.id))!).toMatchObject({ state: 'ok', seq: 2, notifiedSeq: 2 });
  });

  it('removes, on taking the lease over, the statuses of rules removed under the previous holder', async () => {
    const { clock, values, rules, store, evaluator, create } = await setup();
    const kept = await create({ name: 'kept' });
    const removed = await create({ name: 'removed' });
    values.set(kept.id, 20).set(removed.id, 20);
    await evaluator('process-a').tick();
    expect(await store.list('alert_status')).toHaveLength(2);
    await rules.remove('tnt_a', removed.id);
    clock.advance(TTL);
    await evaluator('process-b').tick();
    expect((await store.list('alert_status')).map(([ruleId]) => ruleId)).toEqual([kept.id]);
  });

  it('gives the notifications of a status record begun again new ids: a new firing is never taken for one already delivered', async () => {
    const { store, clock, values, sent, evaluator, create } = await setup();
    const rule = await create({});
    const evaluating = evaluator('process-a');
    values.set(rule.id, 20);
    await evaluating.tick();
    // The record is lost (swept, or its bucket emptied) while the rule lives on.
    await store.delete('alert_status', rule.id);
    clock.advance(30 * SECOND);
    await evaluating.tick();
    expect(sent.map((n) => [n.transition.seq, n.transition.kind])).toEqual([[1, 'firing'], [1, 'firing']]);
    expect(sent[1]!.id).not.toBe(sent[0]!.id);
  });

  it('notifies once when two rounds overlap (a lease changing hands mid-round): the status write that loses the race sends nothing', async () => {
    const { store, values, sent, lines, evaluator, create } = await setup();
    const rule = await create({});
    values.set(rule.id, 20);
    // Between this round's read of the status and its write, another round evaluates the same rule.
    const other = evaluator('process-a');
    const overlapped = evaluator('process-a', undefined, racingStore(store, rule.id, () => other.tick()));
    await overlapped.tick();
    const started = (await other.status('tnt_a', rule.id))!.startedAt!;
    expect(sent.map((n) => [n.id, n.transition.kind])).toEqual([[expectedId(rule.id, 1, started), 'firing']]);
    expect((await other.status('tnt_a', rule.id))!).toMatchObject({ state: 'firing', seq: 1, notifiedSeq: 1 });
    expect(lines.some((l) => l.msg === 'alert rule status written by another evaluator meanwhile: evaluated again next round')).toBe(true);
  });

  it('runs rounds once started, and on stop gives the lease up for another process at once', async () => {
    const { measured, evaluator, create, values } = await setup();
    const rule = await create({});
    values.set(rule.id, 1);
    const a = evaluator('process-a');
    a.start();
    for (let i = 0; i < 400 && measured.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(measured.map((m) => m.holder)).toEqual(['process-a']);
    expect(a.loopStatus().ok).toBe(true);
    await a.stop();
    const b = evaluator('process-b');
    await b.tick();
    expect(measured.map((m) => m.holder)).toEqual(['process-a', 'process-b']);
  });
});
