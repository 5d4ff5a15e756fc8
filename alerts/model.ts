/**
 * Alert rules: what a tenant's admins ask to be told about (a condition on what the console
 * charts, a threshold, how long it must hold), the state each rule is in, the silences that hold
 * notifications back, and the notifications the evaluator hands over. Types only, plus the one
 * rule every process must share: how a notification's id is derived.
 */
import { derivedUuid } from '../core/hash.ts';

export type Comparator = 'above' | 'below';
/** What a window without data means: the condition does not hold, holds, or the state stays. */
export type NoDataPolicy = 'ok' | 'firing' | 'keep';

export type MetricKind = 'gauge' | 'sum' | 'histogram' | 'exp_histogram' | 'summary' | 'agent';
export type MetricAggregation = 'avg' | 'sum' | 'min' | 'max' | 'rate' | 'p50' | 'p95' | 'p99' | 'count';

/** What a rule measures; the composition root's `measure` turns it into one number per window. */
export type AlertCondition =
  | { kind: 'metric'; query: { name: string; kind: MetricKind; aggregation: MetricAggregation; services?: string[]; attributes?: { key: string; value: string }[] } }
  /** Log entries matching the console's log filters: a case-insensitive text, services, the least severity (OTLP numbers), attributes. */
  | { kind: 'log_count'; text?: string; services?: string[]; minSeverity?: number; attributes?: Array<{ key: string; value: string }> }
  /** The fraction (0..1) of the service's server and consumer spans in error. */
  | { kind: 'error_rate'; service: string }
  /** Milliseconds. */
  | { kind: 'latency'; service: string; percentile: 50 | 95 | 99 }
  /** 1 when a deploy in the window was judged a regression, else 0. */
  | { kind: 'deploy_regression'; service?: string };

export interface AlertRule {
  /** 'alr_' + 16 hex digits. */
  id: string;
  tenantId: string;
  name: string;
  condition: AlertCondition;
  /** 'above': the condition holds when the value is > threshold; 'below': when it is < threshold. */
  comparator: Comparator;
  threshold: number;
  /** 60..86400: the range each evaluation measures, ending now. */
  windowSeconds: number;
  /** 0..86400: how long the condition must hold before firing (pending meanwhile). */
  forSeconds: number;
  noData: NoDataPolicy;
  /** At most 20; keys /^[a-zA-Z_][a-zA-Z0-9_]*$/ of at most 64 characters, values of at most 256. Silences match on them. */
  labels: Record<string, string>;
  /** The relay form whose recipients and webhooks get notifications; absent: none. */
  notify?: { siteId: string; formId: string };
  /** 0 (never) or 300..604800: a firing rule notifies again after this long. */
  repeatSeconds: number;
  enabled: boolean;
  /** Epoch ms. */
  createdAt: number;
  updatedAt: number;
}

export type AlertStateName = 'ok' | 'pending' | 'firing';

/** One change of a rule's state, or a reminder that it still fires ('repeat', firing → firing). */
export interface Transition {
  seq: number;
  at: number;
  from: AlertStateName;
  to: AlertStateName;
  value: number | null;
  kind: 'pending' | 'firing' | 'resolved' | 'ok' | 'repeat';
  /** Its notification was held back: by a silence, or as the resolve of a firing itself held back. */
  silenced?: boolean;
}

/** The kinds of transition that notify. */
export const NOTIFYING_KINDS: ReadonlySet<Transition['kind']> = new Set(['firing', 'resolved', 'repeat']);

/** How many transitions a status keeps (the oldest dropped first). */
export const HISTORY_LIMIT = 200;
/** Evaluations a status keeps for the rule's chart: two hours at the default 30 s, 20 minutes at 5 s. */
export const SAMPLE_LIMIT = 240;

/** One record per rule, in the state store. */
export interface AlertStatus {
  ruleId: string;
  tenantId: string;
  state: AlertStateName;
  /** When it entered `state`. */
  since: number;
  value: number | null;
  /** When it was last measured (0: not yet). */
  evaluatedAt: number;
  /**
   * When this status record was begun (epoch ms). Seqs count from 0 again in a new record (the
   * old one lost, or swept while the rule's list was incomplete), so notification ids name it
   * too: a new firing is never taken downstream for an old one already delivered.
   */
  startedAt?: number;
  /** The last transition's seq (0: none). */
  seq: number;
  /** The last seq whose notification was handed over (or silenced). */
  notifiedSeq: number;
  /** When the last notification was handed over (or silenced): the repeat interval counts from it. */
  lastNotifiedAt: number;
  /** Newest last, at most HISTORY_LIMIT. */
  history: Transition[];
  /** The last evaluations, [when, value] (null: no data), oldest first, at most SAMPLE_LIMIT: the rule's chart. */
  samples?: Array<[at: number, value: number | null]>;
}

export interface Silence {
  /** 'sil_' + 16 hex digits. */
  id: string;
  tenantId: string;
  /** Matches this rule. */
  ruleId?: string;
  /** Matches a rule whose labels include every one of these. */
  labels?: Record<string, string>;
  /** Epoch ms; an ended silence matches nothing. */
  endsAt: number;
  comment: string;
  createdBy: string;
  createdAt: number;
}

/**
 * A notification: firing, resolved or repeat. `id` is derived, not random (notificationId): a
 * notification handed over twice (by an evaluator that died after handing it over, before
 * recording it) is recognised downstream as one.
 */
export interface AlertNotification {
  id: string;
  rule: AlertRule;
  transition: Transition;
  status: AlertStatus;
}

/** The id of the notification of transition `seq` of a rule's status record begun at `startedAt`: the same in every process. */
export function notificationId(ruleId: string, startedAt: number, seq: number): string {
  return derivedUuid('alert notification', ruleId, String(startedAt), String(seq));
}
