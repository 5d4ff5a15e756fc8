/**
 * Alert rules in words, as the Alerts page shows them: the condition as a sentence ("error rate
 * of checkout above 0.5 over 2 min"), a measured value in the condition's unit, durations, labels
 * as `key=value` text and back, and an API refusal as a sentence about the form's own field.
 * No DOM here, so it is tested in Node (alert-words.test.ts).
 */
import type { AlertCondition, AlertRule } from '../api.ts';
import { severityName } from './severity.ts';

/** 60 → "1 min", 3600 → "1 h", 604800 → "7 days"; 0 → "0 s". */
export function formatSeconds(seconds: number): string {
  if (seconds % 86_400 === 0 && seconds >= 2 * 86_400) return `${seconds / 86_400} days`;
  if (seconds % 3600 === 0 && seconds > 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0 && seconds > 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

const plain = new Intl.NumberFormat('en-US', { maximumSignificantDigits: 3 });
const whole = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

/** A number as a person reads it: 3 significant digits, or whole from 1,000 on. */
export function formatNumber(value: number): string {
  return Math.abs(value) >= 1000 ? whole.format(value) : plain.format(value);
}

/** A value measured for `condition`, in its unit: an error rate with its percentage, a latency in ms. */
export function formatAlertValue(condition: AlertCondition, value: number | null): string {
  if (value === null) return 'no data';
  if (condition.kind === 'error_rate') return `${formatNumber(value)} (${formatNumber(value * 100)} %)`;
  if (condition.kind === 'latency') return `${formatNumber(value)} ms`;
  return formatNumber(value);
}

/** What the condition measures, without its threshold: "p95 latency of checkout". */
export function describeMeasure(condition: AlertCondition): string {
  switch (condition.kind) {
    case 'metric': {
      const { name, aggregation, services } = condition.query;
      return `${aggregation} of ${name}${services?.length ? ` (${services.join(', ')})` : ''}`;
    }
    case 'log_count': {
      const text = condition.text ? ` containing “${condition.text}”` : '';
      const services = condition.services?.length ? ` from ${condition.services.join(', ')}` : '';
      const severity = condition.minSeverity ? ` at ${severityName({ severityNumber: condition.minSeverity, severityText: '' })} or above` : '';
      return `log entries${text}${services}${severity}`;
    }
    case 'error_rate':
      return `error rate of ${condition.service}`;
    case 'latency':
      return `p${condition.percentile} latency of ${condition.service}`;
    case 'deploy_regression':
      return `deploy regressions of ${condition.service ?? 'any service'}`;
  }
}

/** The whole condition as a sentence: "error rate of checkout above 0.5 over 2 min, for 1 min". */
export function describeCondition(rule: Pick<AlertRule, 'condition' | 'comparator' | 'threshold' | 'windowSeconds' | 'forSeconds'>): string {
  const { condition, comparator, threshold, windowSeconds, forSeconds } = rule;
  const held = forSeconds > 0 ? `, for ${formatSeconds(forSeconds)}` : '';
  // A regression is 1 or 0: "above 0.5" reads better as what it means.
  if (condition.kind === 'deploy_regression' && comparator === 'above' && threshold >= 0 && threshold < 1) {
    return `a deploy of ${condition.service ?? 'any service'} judged a regression within ${formatSeconds(windowSeconds)}${held}`;
  }
  // A count reads as one: "more than 25 log entries …", not "log entries … above 25".
  if (condition.kind === 'log_count') {
    return `${comparator === 'above' ? 'more than' : 'fewer than'} ${formatNumber(threshold)} ${describeMeasure(condition)} in ${formatSeconds(windowSeconds)}${held}`;
  }
  const unit = condition.kind === 'latency' ? ' ms' : '';
  return `${describeMeasure(condition)} ${comparator} ${formatNumber(threshold)}${unit} over ${formatSeconds(windowSeconds)}${held}`;
}

/** Labels as the form's text holds them: "team=payments, tier=1". */
export function formatLabels(labels: Record<string, string>): string {
  return Object.entries(labels).map(([key, value]) => `${key}=${value}`).join(', ');
}

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** "team=payments, tier=1" as labels, or what is wrong with it (names as Prometheus writes them). */
export function parseLabels(text: string): { labels: Record<string, string> } | { error: string } {
  const labels: Record<string, string> = {};
  for (const pair of text.split(',').map((one) => one.trim()).filter(Boolean)) {
    const at = pair.indexOf('=');
    const key = at < 0 ? pair : pair.slice(0, at).trim();
    if (at <= 0) return { error: `“${pair}” is not key=value` };
    if (!LABEL_NAME.test(key)) return { error: `“${key}”: a label name is letters, digits and _, not starting with a digit` };
    labels[key] = pair.slice(at + 1).trim();
  }
  return { labels };
}

/**
 * An API refusal (`Validation failed: condition.service must …`, field `condition.service`) as a
 * sentence about the form's field: "Service: must …". `names` maps API fields to the form's labels.
 */
export function readableRefusal(message: string, field: string | undefined, names: Record<string, string>): string {
  const text = message.replace(/^Validation failed: /, '');
  if (!field) return text;
  const named = names[field] ?? names[field.replace(/\[.*$|\..*$/, '')];
  const rest = text.startsWith(field) ? text.slice(field.length).trim() : text;
  return named ? `${named}: ${rest}` : text;
}

/** "in 59 min", "in 4 h", "in 7 days": how far off a time to come is. */
export function formatUntil(ms: number, now = Date.now()): string {
  const seconds = Math.max(0, Math.round((ms - now) / 1000));
  if (seconds < 30) return seconds === 0 ? 'now' : 'in under a minute';
  // Each unit rounded before it is compared, so 59 min 50 s is "in 1 h", never "in 60 min".
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `in ${minutes} min`;
  const hours = Math.round(seconds / 3600);
  if (hours < 24) return `in ${hours} h`;
  const days = Math.round(seconds / 86_400);
  return days === 1 ? 'in a day' : `in ${days} days`;
}
