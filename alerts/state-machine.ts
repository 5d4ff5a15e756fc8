/**
 * The life of an alert rule, as a pure function of its last status and one measured value, so
 * every edge can be tested as a table and every process steps a rule the same way.
 *
 *   ok ──holds──▶ pending ──held forSeconds──▶ firing ──stops holding──▶ ok ('resolved')
 *    ▲              │                            └──repeatSeconds since last notified──▶ firing ('repeat')
 *    └──stops holding ('ok')
 *
 * With forSeconds 0 a rule goes from ok to firing in one transition (kind 'firing'): it never sat
 * in pending, so its history does not say it did, and a firing announces itself once. No data
 * follows rule.noData: 'ok' counts as not holding, 'firing' as holding (through pending like any
 * value, so forSeconds still applies), 'keep' changes no state (a pending rule neither fires nor
 * clears on an empty window; a firing one still repeats).
 */
import { HISTORY_LIMIT, NOTIFYING_KINDS, SAMPLE_LIMIT, type AlertRule, type AlertStateName, type AlertStatus, type Transition } from './model.ts';

/** Whether the condition holds for `value`; undefined: no data, and the rule keeps its state. */
export function conditionHolds(rule: AlertRule, value: number | null): boolean | undefined {
  if (value === null) return rule.noData === 'keep' ? undefined : rule.noData === 'firing';
  return rule.comparator === 'above' ? value > rule.threshold : value < rule.threshold;
}

/** The status after measuring `value` (null: no data) at `now`; `status` is not changed. */
export function step(rule: AlertRule, status: AlertStatus, value: number | null, now: number): AlertStatus {
  // NaN or an infinity is no data: JSON would store it as null anyway.
  const measured = value !== null && Number.isFinite(value) ? value : null;
  const next: AlertStatus = {
    ...status, ruleId: rule.id, tenantId: rule.tenantId, value: measured, evaluatedAt: now,
    samples: [...(status.samples ?? []), [now, measured] as [number, number | null]].slice(-SAMPLE_LIMIT),
  };
  const move = (to: AlertStateName, kind: Transition['kind']) => {
    const transition: Transition = { seq: next.seq + 1, at: now, from: next.state, to, value: measured, kind };
    next.seq = transition.seq;
    next.history = [...next.history, transition].slice(-HISTORY_LIMIT);
    if (to !== next.state) [next.state, next.since] = [to, now];
  };
  const holds = conditionHolds(rule, measured);
  if (holds !== undefined) {
    if (next.state === 'ok' && holds) rule.forSeconds === 0 ? move('firing', 'firing') : move('pending', 'pending');
    else if (next.state === 'pending' && !holds) move('ok', 'ok');
    else if (next.state === 'pending' && now - next.since >= rule.forSeconds * 1000) move('firing', 'firing');
    else if (next.state === 'firing' && !holds) move('ok', 'resolved');
  }
  if (next.state === 'firing' && next.seq === status.seq && repeatDue(rule, next, now)) move('firing', 'repeat');
  return next;
}

/**
 * A reminder is due once repeatSeconds have passed since the last notification was handed over,
 * and only then: while one waits to be handed over (the notifier failing), no reminder piles up
 * behind it.
 */
function repeatDue(rule: AlertRule, status: AlertStatus, now: number): boolean {
  return rule.repeatSeconds > 0 && notificationsDue(status).length === 0 && now - status.lastNotifiedAt >= rule.repeatSeconds * 1000;
}

/** A new rule's status: ok, nothing measured, no transition. */
export function initialStatus(rule: AlertRule, now: number): AlertStatus {
  return { ruleId: rule.id, tenantId: rule.tenantId, state: 'ok', since: now, value: null, evaluatedAt: 0, startedAt: now, seq: 0, notifiedSeq: 0, lastNotifiedAt: 0, history: [] };
}

/** The transitions still to notify (or silence), oldest first: firing, resolved and repeat past notifiedSeq. */
export function notificationsDue(status: AlertStatus): Transition[] {
  return status.history.filter((t) => t.seq > status.notifiedSeq && NOTIFYING_KINDS.has(t.kind));
}

/**
 * Whether `transition` resolves a firing nobody was told of: the last firing or reminder before
 * it was silenced. Announcing its end would be noise, so it is held back as if silenced too.
 */
export function resolvesUnannounced(status: AlertStatus, transition: Transition): boolean {
  if (transition.kind !== 'resolved') return false;
  const announced = status.history.filter((t) => t.seq < transition.seq && (t.kind === 'firing' || t.kind === 'repeat')).at(-1);
  return announced?.silenced === true;
}
