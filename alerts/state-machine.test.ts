import { describe, expect, it } from 'vitest';
import { START, testRule } from './fixture.ts';
import { SAMPLE_LIMIT, type AlertRule, type AlertStateName, type AlertStatus, type Transition } from './model.ts';
import { initialStatus, notificationsDue, resolvesUnannounced, step } from './state-machine.ts';

const SECOND = 1000;

/** A status in `state` since `sinceAgo` ms before START, every notification so far handed over. */
function statusIn(rule: AlertRule, state: AlertStateName, sinceAgo = 0, lastNotifiedAgo = 0): AlertStatus {
  return { ...initialStatus(rule, START - sinceAgo), state, seq: 3, notifiedSeq: 3, lastNotifiedAt: START - lastNotifiedAgo };
}

const kinds = (before: AlertStatus, after: AlertStatus) => after.history.filter((t) => t.seq > before.seq).map((t) => t.kind);

describe('the evaluations a status keeps for the chart', () => {
  it('appends each one, no data as null, and keeps the last SAMPLE_LIMIT', () => {
    const rule = testRule();
    let status = initialStatus(rule, START);
    const values = [1, Number.NaN, null, 12, ...Array.from({ length: SAMPLE_LIMIT }, (_, i) => i)];
    values.forEach((value, i) => { status = step(rule, status, value, START + i * SECOND); });
    expect(status.samples).toHaveLength(SAMPLE_LIMIT);
    expect(status.samples!.at(-1)).toEqual([START + (values.length - 1) * SECOND, SAMPLE_LIMIT - 1]);
    let fresh = initialStatus(rule, START);
    for (const [i, value] of [1, Number.NaN, null].entries()) fresh = step(rule, fresh, value, START + i * SECOND);
    expect(fresh.samples).toEqual([[START, 1], [START + SECOND, null], [START + 2 * SECOND, null]]);
  });
});

describe('step', () => {
  // threshold 10, 'above' unless the row says otherwise; forSeconds 60 unless it says otherwise.
  const table: Array<{ name: string; from: AlertStateName; sinceAgo?: number; value: number | null; rule?: Partial<AlertRule>; to: AlertStateName; kinds: Transition['kind'][] }> = [
    { name: 'ok stays ok while the condition does not hold (equal is not above)', from: 'ok', value: 10, to: 'ok', kinds: [] },
    { name: 'ok → pending when the condition holds', from: 'ok', value: 11, to: 'pending', kinds: ['pending'] },
    { name: "ok → pending for 'below'", from: 'ok', value: 9, rule: { comparator: 'below' }, to: 'pending', kinds: ['pending'] },
    { name: "'below' does not hold above the threshold", from: 'ok', value: 11, rule: { comparator: 'below' }, to: 'ok', kinds: [] },
    { name: 'ok → firing in one transition with forSeconds 0', from: 'ok', value: 11, rule: { forSeconds: 0 }, to: 'firing', kinds: ['firing'] },
    { name: 'pending stays pending before forSeconds have passed', from: 'pending', sinceAgo: 59 * SECOND, value: 11, to: 'pending', kinds: [] },
    { name: 'pending → firing once the condition held forSeconds', from: 'pending', sinceAgo: 60 * SECOND, value: 11, to: 'firing', kinds: ['firing'] },
    { name: 'pending → ok when it stops holding', from: 'pending', sinceAgo: 60 * SECOND, value: 10, to: 'ok', kinds: ['ok'] },
    { name: 'firing stays firing while it holds', from: 'firing', value: 11, to: 'firing', kinds: [] },
    { name: 'firing → ok (resolved) when it stops holding', from: 'firing', value: 3, to: 'ok', kinds: ['resolved'] },
    { name: "no data, 'ok': ok stays ok", from: 'ok', value: null, to: 'ok', kinds: [] },
    { name: "no data, 'ok': pending → ok", from: 'pending', value: null, to: 'ok', kinds: ['ok'] },
    { name: "no data, 'ok': firing resolves", from: 'firing', value: null, to: 'ok', kinds: ['resolved'] },
    { name: "no data, 'firing': holds, through pending", from: 'ok', value: null, rule: { noData: 'firing' }, to: 'pending', kinds: ['pending'] },
    { name: "no data, 'firing': fires once it held forSeconds", from: 'pending', sinceAgo: 60 * SECOND, value: null, rule: { noData: 'firing' }, to: 'firing', kinds: ['firing'] },
    { name: "no data, 'firing', forSeconds 0: fires at once", from: 'ok', value: null, rule: { noData: 'firing', forSeconds: 0 }, to: 'firing', kinds: ['firing'] },
    { name: "no data, 'keep': ok stays ok", from: 'ok', value: null, rule: { noData: 'keep' }, to: 'ok', kinds: [] },
    { name: "no data, 'keep': pending neither fires nor clears", from: 'pending', sinceAgo: 600 * SECOND, value: null, rule: { noData: 'keep' }, to: 'pending', kinds: [] },
    { name: "no data, 'keep': firing stays firing", from: 'firing', value: null, rule: { noData: 'keep' }, to: 'firing', kinds: [] },
    { name: 'NaN is no data', from: 'firing', value: Number.NaN, to: 'ok', kinds: ['resolved'] },
    { name: 'an infinity is no data', from: 'ok', value: Number.POSITIVE_INFINITY, rule: { noData: 'keep' }, to: 'ok', kinds: [] },
  ];

  for (const row of table) {
    it(row.name, () => {
      const rule = testRule({ threshold: 10, forSeconds: 60, ...row.rule });
      const before = statusIn(rule, row.from, row.sinceAgo ?? 0);
      const after = step(rule, before, row.value, START);
      expect(after.state).toBe(row.to);
      expect(kinds(before, after)).toEqual(row.kinds);
      expect(after.seq).toBe(before.seq + row.kinds.length);
      expect(after.since).toBe(row.to === row.from ? before.since : START);
      expect(after.evaluatedAt).toBe(START);
    });
  }

  it('records each transition with its seq, time, states and value, and leaves the old status as it was', () => {
    const rule = testRule({ threshold: 10, forSeconds: 60 });
    const before = initialStatus(rule, START);
    const snapshot = structuredClone(before);
    const pending = step(rule, before, 12.5, START + SECOND);
    expect(before).toEqual(snapshot);
    expect(pending).toMatchObject({ state: 'pending', since: START + SECOND, value: 12.5, seq: 1, notifiedSeq: 0 });
    expect(pending.history).toEqual([{ seq: 1, at: START + SECOND, from: 'ok', to: 'pending', value: 12.5, kind: 'pending' }]);
    const firing = step(rule, pending, 13, START + 61 * SECOND);
    expect(firing.history.at(-1)).toEqual({ seq: 2, at: START + 61 * SECOND, from: 'pending', to: 'firing', value: 13, kind: 'firing' });
    expect(notificationsDue(firing).map((t) => t.seq)).toEqual([2]);
  });

  it('takes the threshold of the rule as it is now: an edit applies to the next step', () => {
    const before = statusIn(testRule({ threshold: 10 }), 'firing');
    expect(step(testRule({ threshold: 20 }), before, 15, START).state).toBe('ok');
  });

  describe('repeat', () => {
    const rule = testRule({ threshold: 10, repeatSeconds: 300 });

    it('reminds a firing rule once repeatSeconds have passed since the last notification, and not before', () => {
      const early = statusIn(rule, 'firing', 600 * SECOND, 299 * SECOND);
      expect(kinds(early, step(rule, early, 11, START))).toEqual([]);
      const due = statusIn(rule, 'firing', 600 * SECOND, 300 * SECOND);
      const after = step(rule, due, 11, START);
      expect(after.history.at(-1)).toMatchObject({ kind: 'repeat', from: 'firing', to: 'firing', seq: 4 });
      expect(after).toMatchObject({ state: 'firing', since: due.since });
      expect(notificationsDue(after).map((t) => t.kind)).toEqual(['repeat']);
    });

    it("reminds through no data under 'keep', as the rule still fires", () => {
      const due = statusIn(testRule({ ...rule, noData: 'keep' }), 'firing', 600 * SECOND, 300 * SECOND);
      expect(kinds(due, step({ ...rule, noData: 'keep' }, due, null, START))).toEqual(['repeat']);
    });

    it('never reminds with repeatSeconds 0', () => {
      const quiet = testRule({ threshold: 10, repeatSeconds: 0 });
      const status = statusIn(quiet, 'firing', 30 * 86_400 * SECOND, 30 * 86_400 * SECOND);
      expect(kinds(status, step(quiet, status, 11, START))).toEqual([]);
    });

    it('piles no reminder behind a notification not yet handed over', () => {
      const waiting = { ...statusIn(rule, 'firing', 600 * SECOND, 600 * SECOND), notifiedSeq: 2 };
      waiting.history = [{ seq: 3, at: START - 600 * SECOND, from: 'pending', to: 'firing', value: 11, kind: 'firing' }];
      expect(kinds(waiting, step(rule, waiting, 11, START))).toEqual([]);
    });

    it('does not remind in the step that resolves', () => {
      const due = statusIn(rule, 'firing', 600 * SECOND, 600 * SECOND);
      expect(kinds(due, step(rule, due, 1, START))).toEqual(['resolved']);
    });
  });

  it('keeps the newest 200 transitions, dropping the oldest', () => {
    const rule = testRule({ threshold: 10, forSeconds: 0 });
    let status = initialStatus(rule, START);
    for (let i = 0; i < 250; i++) status = step(rule, status, i % 2 === 0 ? 11 : 1, START + i * SECOND);
    expect(status.seq).toBe(250);
    expect(status.history).toHaveLength(200);
    expect(status.history[0]!.seq).toBe(51);
    expect(status.history.at(-1)).toMatchObject({ seq: 250, kind: 'resolved' });
  });
});

describe('initialStatus', () => {
  it('is ok, unmeasured, with no transition', () => {
    expect(initialStatus(testRule(), START)).toEqual({
      ruleId: 'alr_0123456789abcdef', tenantId: 'tnt_a', state: 'ok', since: START, value: null, evaluatedAt: 0,
      startedAt: START, seq: 0, notifiedSeq: 0, lastNotifiedAt: 0, history: [],
    });
  });
});

describe('notificationsDue', () => {
  const t = (seq: number, kind: Transition['kind']): Transition => ({ seq, at: START, from: 'ok', to: 'ok', value: 1, kind });

  it('lists firing, resolved and repeat transitions past notifiedSeq, oldest first', () => {
    const status = { ...initialStatus(testRule(), START), seq: 6, notifiedSeq: 2, history: [t(1, 'pending'), t(2, 'firing'), t(3, 'resolved'), t(4, 'pending'), t(5, 'ok'), t(6, 'firing')] };
    expect(notificationsDue(status).map((x) => x.seq)).toEqual([3, 6]);
    expect(notificationsDue({ ...status, notifiedSeq: 6 })).toEqual([]);
  });

  it('says a resolve announces nothing when the firing before it was silenced', () => {
    const status = { ...initialStatus(testRule(), START), history: [t(1, 'firing'), t(2, 'resolved'), { ...t(3, 'firing'), silenced: true }, t(4, 'resolved'), t(5, 'firing'), { ...t(6, 'repeat'), silenced: true }, t(7, 'resolved')] };
    expect(status.history.map((x) => resolvesUnannounced(status, x))).toEqual([false, false, false, true, false, false, true]);
  });
});
