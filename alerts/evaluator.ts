/**
 * The alert evaluator: every interval, the process holding the lease measures each enabled rule
 * over its window, steps its state (state-machine.ts) and hands the notifications due over.
 * How a rule is measured and how a notification is sent are injected by the composition root.
 *
 * Nothing is lost and nothing announced twice under two names, even when an evaluator dies at
 * any point or two overlap for a moment (a lease that changed hands mid-round):
 * - the new status is written by compare-and-set before anything is notified; an evaluator that
 *   lost the race leaves the rule to the next round;
 * - a notification's id is derived from the rule and the transition's seq, and notifiedSeq moves
 *   only after notify resolved: a notification handed over but not recorded is handed over again
 *   under the same id, which downstream recognises; one recorded is never sent again.
 *
 * Fairness: each round takes at most maxRulesPerTenantPerTick rules of each tenant, tenants
 * interleaved and the first one rotating, and the next round goes on from where each tenant's
 * turn stopped; a tenant with many rules has each measured less often, never the others' delayed.
 */
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { sleep, Supervisor, type LoopContext } from '../core/supervisor.ts';
import { recordOf } from '../state/shape.ts';
import type { StateStore, Versioned } from '../state/store.ts';
import type { Lease } from './lease.ts';
import { notificationId, type AlertNotification, type AlertRule, type AlertStatus } from './model.ts';
import type { AlertRules } from './rules.ts';
import type { Silences } from './silences.ts';
import { initialStatus, notificationsDue, resolvesUnannounced, step } from './state-machine.ts';

const STATUSES = 'alert_status';
const LOOP = 'alert evaluator';
/** Compare-and-set rounds lost to another writer before recording a notification is left to the next round. */
const MAX_RACES = 3;

export interface AlertEvaluatorDeps {
  rules: AlertRules;
  silences: Silences;
  state: StateStore;
  lease: Lease;
  /** One number for the rule over the range (null: no data). May throw: the rule keeps its state, and it is logged. */
  measure(rule: AlertRule, range: { from: number; to: number }): Promise<number | null>;
  /** Hands a notification over. May throw: handed over again next round, under the same id. */
  notify(notification: AlertNotification): Promise<void>;
  log: Logger;
  now?: () => number;
  /** Between rounds. Default 30 s. */
  intervalMs?: number;
  /** Rules of one tenant measured per round, so one tenant's many rules cannot starve the others. Default 20. */
  maxRulesPerTenantPerTick?: number;
  /** Called when the loop failed and is restarted (the composition root counts it). */
  onRestart?: (loop: string) => void;
}

const isStoredStatus = recordOf<AlertStatus>({
  ruleId: 'string', tenantId: 'string', state: 'string', since: 'number', value: 'number?', evaluatedAt: 'number',
  seq: 'number', notifiedSeq: 'number', lastNotifiedAt: 'number', history: 'array',
});

export class AlertEvaluator {
  private readonly now: () => number;
  private readonly intervalMs: number;
  private readonly perTenant: number;
  /** Where each tenant's next turn starts in its enabled rules (ordered by id). */
  private readonly cursors = new Map<string, number>();
  /** Which tenant goes first this round. */
  private turn = 0;
  /** The rules of the last round this process held the lease; undefined: it has not, or has lost it since. */
  private lastRuleIds: Set<string> | undefined;
  private ticking: Promise<void> | undefined;
  private supervisor: Supervisor | undefined;
  private readonly stopping = new AbortController();

  constructor(private readonly deps: AlertEvaluatorDeps) {
    this.now = deps.now ?? Date.now;
    this.intervalMs = deps.intervalMs ?? 30_000;
    this.perTenant = deps.maxRulesPerTenantPerTick ?? 20;
  }

  /** Runs rounds every intervalMs under a supervisor: a round that fails (the store down) is logged and retried with backoff. */
  start(): void {
    if (this.supervisor) return;
    this.supervisor = new Supervisor({ log: this.deps.log, onRestart: this.deps.onRestart });
    this.supervisor.run(LOOP, (context) => this.run(context));
  }

  /** The loop's health, for readiness. */
  loopStatus(): ComponentStatus {
    return this.supervisor?.status(LOOP) ?? { ok: false, detail: 'not started' };
  }

  /** Ends the loop after the rule being evaluated, then gives the lease up so another process takes over at once. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.supervisor?.stop();
    await this.ticking?.catch(() => undefined);
    await this.deps.lease.release().catch((err) => this.deps.log.warn({ err }, 'alert evaluator lease not released: another process takes it when it expires'));
  }

  /** One round (the loop's, or a test's); a call while one runs waits for that one. */
  tick(): Promise<void> {
    this.ticking ??= this.round().finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  /** The rule's status, if it has been evaluated and is the tenant's. */
  async status(tenantId: string, ruleId: string): Promise<AlertStatus | undefined> {
    const stored = await this.deps.state.get<unknown>(STATUSES, ruleId);
    return isStoredStatus(stored) && stored.tenantId === tenantId ? stored : undefined;
  }

  /** The statuses of the tenant's evaluated rules. */
  async statuses(tenantId: string): Promise<AlertStatus[]> {
    return (await this.deps.state.list<unknown>(STATUSES)).map(([, s]) => s).filter(isStoredStatus).filter((s) => s.tenantId === tenantId);
  }

  private async run({ signal }: LoopContext): Promise<void> {
    while (!signal.aborted) {
      await this.tick();
      await sleep(this.intervalMs, signal);
    }
  }

  private async round(): Promise<void> {
    if (!(await this.holdLease())) return;
    let heldAt = this.now();
    const rules = await this.removeStatusesOfRemovedRules();
    for (const rule of this.turnOrder(rules.filter((rule) => rule.enabled))) {
      if (this.stopping.signal.aborted) return;
      // Renewed on the way: a long round must not run on while another process takes the lease.
      if (this.now() - heldAt >= this.deps.lease.ttlMs / 2) {
        if (!(await this.holdLease())) return;
        heldAt = this.now();
      }
      await this.evaluate(rule);
    }
  }

  /** Takes or renews the lease; once it was not held, the next round that holds it sweeps every status. */
  private async holdLease(): Promise<boolean> {
    const held = await this.deps.lease.tryHold();
    if (!held) this.lastRuleIds = undefined;
    return held;
  }

  /**
   * Every rule, after removing the statuses of rules removed since the last round. Listing the
   * statuses (their histories) every round would cost more than the round: the rules that left
   * since the last round this process held the lease are enough, and the whole bucket is swept
   * only on taking the lease (removals seen by another holder). The statuses are listed before
   * the rules, so a status whose rule the later list misses had its rule removed.
   */
  private async removeStatusesOfRemovedRules(): Promise<AlertRule[]> {
    const candidates = this.lastRuleIds ?? (await this.deps.state.list<unknown>(STATUSES)).map(([ruleId]) => ruleId);
    const rules = await this.deps.rules.all();
    const ruleIds = new Set(rules.map((rule) => rule.id));
    for (const ruleId of candidates) if (!ruleIds.has(ruleId)) await this.deps.state.delete(STATUSES, ruleId);
    this.lastRuleIds = ruleIds;
    return rules;
  }

  /** This round's rules: up to perTenant of each tenant, continuing each tenant's turn, tenants interleaved. */
  private turnOrder(enabled: AlertRule[]): AlertRule[] {
    const byTenant = new Map<string, AlertRule[]>();
    for (const rule of enabled.sort((a, b) => a.id.localeCompare(b.id))) byTenant.set(rule.tenantId, [...(byTenant.get(rule.tenantId) ?? []), rule]);
    for (const tenant of this.cursors.keys()) if (!byTenant.has(tenant)) this.cursors.delete(tenant);
    const tenants = [...byTenant.keys()].sort();
    const first = tenants.length === 0 ? 0 : this.turn++ % tenants.length;
    const turns = [...tenants.slice(first), ...tenants.slice(0, first)].map((tenant) => {
      const rules = byTenant.get(tenant)!;
      const start = (this.cursors.get(tenant) ?? 0) % rules.length;
      const count = Math.min(this.perTenant, rules.length);
      this.cursors.set(tenant, (start + count) % rules.length);
      return Array.from({ length: count }, (_, i) => rules[(start + i) % rules.length]!);
    });
    const order: AlertRule[] = [];
    for (let i = 0; i < this.perTenant; i++) for (const turn of turns) if (turn[i]) order.push(turn[i]!);
    return order;
  }

  private async evaluate(rule: AlertRule): Promise<void> {
    const { state, log } = this.deps;
    const now = this.now();
    let value: number | null;
    try {
      value = await this.deps.measure(rule, { from: now - rule.windowSeconds * 1000, to: now });
    } catch (err) {
      log.warn({ err, ruleId: rule.id, tenantId: rule.tenantId }, 'alert rule not evaluated: measuring it failed; its state stays');
      return;
    }
    const stored = await state.getVersioned<unknown>(STATUSES, rule.id);
    const before = stored && isStoredStatus(stored.value) ? stored.value : initialStatus(rule, now);
    const after = step(rule, before, value, now);
    // Written before anything is notified: a notification is only ever sent for a recorded transition.
    const revision = stored ? await state.update(STATUSES, rule.id, after, stored.revision) : await state.create(STATUSES, rule.id, after);
    if (revision === undefined) {
      log.warn({ ruleId: rule.id, tenantId: rule.tenantId }, 'alert rule status written by another evaluator meanwhile: evaluated again next round');
      return;
    }
    for (const { kind, from, to, seq } of after.history.filter((t) => t.seq > before.seq)) {
      log.info({ ruleId: rule.id, tenantId: rule.tenantId, kind, from, to, seq, value: after.value }, 'alert rule transition');
    }
    await this.handOver(rule, { value: after, revision }, now);
  }

  /** Hands the due notifications over in order; the first that fails stops the rest until the next round. */
  private async handOver(rule: AlertRule, current: Versioned<AlertStatus>, now: number): Promise<void> {
    const { log } = this.deps;
    let silenced: boolean | undefined;
    for (const transition of notificationsDue(current.value)) {
      if (current.value.notifiedSeq >= transition.seq) continue;
      const held = resolvesUnannounced(current.value, transition) || (silenced ??= await this.deps.silences.silences(rule, now));
      const id = notificationId(rule.id, current.value.startedAt ?? 0, transition.seq);
      const context = { ruleId: rule.id, tenantId: rule.tenantId, kind: transition.kind, seq: transition.seq, notificationId: id };
      if (!held) {
        try {
          await this.deps.notify({ id, rule, transition, status: current.value });
        } catch (err) {
          log.warn({ ...context, err }, 'alert notification not handed over: tried again next round, under the same id');
          return;
        }
      }
      log.info(context, held ? 'alert notification held back by a silence' : 'alert notification handed over');
      const recorded = await this.recordHandled(rule.id, current, transition.seq, held, now);
      if (!recorded) return;
      current = recorded;
    }
  }

  /**
   * Moves notifiedSeq to `seq` (and marks the transition silenced if it was held back). A status
   * changed meanwhile is read again and the change made on it: notifiedSeq only moves forward, so
   * that merge loses nothing. Undefined when the status is gone (the rule removed) or the races
   * ran out: the notification is then handed over again next round, under the same id.
   */
  private async recordHandled(ruleId: string, current: Versioned<AlertStatus>, seq: number, silenced: boolean, now: number): Promise<Versioned<AlertStatus> | undefined> {
    for (let race = 0; race < MAX_RACES; race++) {
      const status = current.value;
      if (status.notifiedSeq >= seq) return current;
      const history = silenced ? status.history.map((t) => (t.seq === seq ? { ...t, silenced: true } : t)) : status.history;
      const next: AlertStatus = { ...status, notifiedSeq: seq, lastNotifiedAt: now, history };
      const revision = await this.deps.state.update(STATUSES, ruleId, next, current.revision);
      if (revision !== undefined) return { value: next, revision };
      const reread = await this.deps.state.getVersioned<unknown>(STATUSES, ruleId);
      if (!reread || !isStoredStatus(reread.value)) return undefined;
      current = reread as Versioned<AlertStatus>;
    }
    return undefined;
  }
}
