/**
 * Alert rules, the face the composition root and the front ends import: rules and silences per
 * tenant, the evaluator and its lease. How a rule is measured and how a notification is sent are
 * the evaluator's injected `measure` and `notify`; nothing here speaks HTTP or reads storage.
 */
export { AlertEvaluator, type AlertEvaluatorDeps } from './evaluator.ts';
export { Lease } from './lease.ts';
export {
  notificationId,
  type AlertCondition, type AlertNotification, type AlertRule, type AlertStateName, type AlertStatus,
  type Comparator, type NoDataPolicy, type Silence, type Transition,
} from './model.ts';
export { AlertRules, MAX_RULES_PER_TENANT, validateRuleFields, type RuleFields } from './rules.ts';
export { ALERT_SCHEMAS } from './schemas.ts';
export { MAX_SILENCES_PER_TENANT, Silences, validateSilenceFields, type SilenceFields } from './silences.ts';
export { initialStatus, notificationsDue, step } from './state-machine.ts';
