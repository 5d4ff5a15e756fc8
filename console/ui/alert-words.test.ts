/**
 * Alert rules as the Alerts page words them: every condition kind as a sentence, values in their
 * unit, labels typed as text and what is wrong with them, an API refusal about the form's field.
 */
import { describe, expect, it } from 'vitest';
import type { AlertCondition } from '../api.ts';
import { describeCondition, formatAlertValue, formatSeconds, formatUntil, parseLabels, readableRefusal } from './alert-words.ts';

const rule = (condition: AlertCondition, threshold: number, more: { comparator?: 'above' | 'below'; windowSeconds?: number; forSeconds?: number } = {}) =>
  describeCondition({ condition, threshold, comparator: more.comparator ?? 'above', windowSeconds: more.windowSeconds ?? 120, forSeconds: more.forSeconds ?? 0 });

describe('describeCondition', () => {
  it('says each kind of condition as a sentence, with its threshold, window and for-duration', () => {
    expect(rule({ kind: 'error_rate', service: 'checkout' }, 0.5)).toBe('error rate of checkout above 0.5 over 2 min');
    expect(rule({ kind: 'latency', service: 'checkout', percentile: 95 }, 300, { windowSeconds: 300, forSeconds: 60 })).toBe('p95 latency of checkout above 300 ms over 5 min, for 1 min');
    expect(rule({ kind: 'metric', query: { name: 'queue.depth', kind: 'gauge', aggregation: 'max', services: ['worker'] } }, 10, { comparator: 'below', windowSeconds: 3600 }))
      .toBe('max of queue.depth (worker) below 10 over 1 h');
    expect(rule({ kind: 'log_count', text: 'timeout', services: ['checkout', 'payment'], minSeverity: 17 }, 25)).toBe('more than 25 log entries containing “timeout” from checkout, payment at error or above in 2 min');
    expect(rule({ kind: 'log_count' }, 1, { comparator: 'below', windowSeconds: 900 })).toBe('fewer than 1 log entries in 15 min');
    expect(rule({ kind: 'deploy_regression', service: 'payment' }, 0.5, { windowSeconds: 900 })).toBe('a deploy of payment judged a regression within 15 min');
    expect(rule({ kind: 'deploy_regression' }, 2)).toBe('deploy regressions of any service above 2 over 2 min');
  });
});

describe('values and durations', () => {
  it('writes a value in its condition\'s unit, and no data as such', () => {
    expect(formatAlertValue({ kind: 'error_rate', service: 's' }, 0.8)).toBe('0.8 (80 %)');
    expect(formatAlertValue({ kind: 'error_rate', service: 's' }, 1 / 6)).toBe('0.167 (16.7 %)');
    expect(formatAlertValue({ kind: 'latency', service: 's', percentile: 99 }, 1234.5)).toBe('1,235 ms');
    expect(formatAlertValue({ kind: 'log_count' }, 42)).toBe('42');
    expect(formatAlertValue({ kind: 'log_count' }, null)).toBe('no data');
  });

  it('writes durations and times to come', () => {
    expect([0, 45, 60, 300, 3600, 14_400, 86_400, 604_800].map(formatSeconds)).toEqual(['0 s', '45 s', '1 min', '5 min', '1 h', '4 h', '24 h', '7 days']);
    const now = 1_000_000_000_000;
    expect([20_000, 3_540_000, 3_590_000, 4 * 3_600_000, 7 * 86_400_000].map((ahead) => formatUntil(now + ahead, now))).toEqual(['in under a minute', 'in 59 min', 'in 1 h', 'in 4 h', 'in 7 days']);
  });
});

describe('parseLabels', () => {
  it('reads key=value pairs separated by commas, the value trimmed and allowed to hold =', () => {
    expect(parseLabels(' team=payments, query=a=b ,')).toEqual({ labels: { team: 'payments', query: 'a=b' } });
    expect(parseLabels('')).toEqual({ labels: {} });
  });

  it('says what is wrong: a pair without =, a name Prometheus would refuse', () => {
    expect(parseLabels('team')).toEqual({ error: '“team” is not key=value' });
    expect(parseLabels('=x')).toEqual({ error: '“=x” is not key=value' });
    expect(parseLabels('1team=x')).toEqual({ error: '“1team”: a label name is letters, digits and _, not starting with a digit' });
  });
});

describe('readableRefusal', () => {
  const names = { name: 'Name', 'condition.service': 'Service', labels: 'Labels' };
  it("names the form's field instead of the API's path", () => {
    expect(readableRefusal('Validation failed: condition.service must NOT have more than 1024 characters', 'condition.service', names)).toBe('Service: must NOT have more than 1024 characters');
    expect(readableRefusal('Validation failed: labels["1x"] key must match pattern', 'labels["1x"]', names)).toBe('Labels: key must match pattern');
  });

  it('keeps the message whole where it names no field the form has', () => {
    expect(readableRefusal('Too many alert rules', undefined, names)).toBe('Too many alert rules');
    expect(readableRefusal('Validation failed: body must be object', 'body', names)).toBe('body must be object');
  });
});
