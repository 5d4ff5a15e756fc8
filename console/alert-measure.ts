/**
 * What an alert rule measures, read as the console's charts read it: through the same queries
 * (ConsoleReads, validated, bound, under the console's limits) and the same read gate, so an
 * evaluation costs what a chart does and one tenant's rules wait their turn behind its own reads.
 * A window with nothing in it is "no data" (null), which the rule's no-data policy decides on.
 */
import type { AlertCondition, AlertRule } from '../alerts/index.ts';
import type { MetricSeries } from './api.ts';
import type { ReadGate } from '../core/read-gate.ts';
import type { ConsoleReads, Scope } from './reads.ts';

/** Seconds per point of a metric rule's query: the SDKs' default export interval. */
const METRIC_STEP_SECONDS = 60;

export type Measure = (rule: AlertRule, range: { from: number; to: number }) => Promise<number | null>;

/** `sourcesOf`: the tenant's SourceIds (nothing outside them is read). */
export function alertMeasure(reads: ConsoleReads, gate: ReadGate, sourcesOf: (tenantId: string) => Promise<Scope>): Measure {
  return async (rule, range) => {
    const sources = await sourcesOf(rule.tenantId);
    return gate.run(rule.tenantId, () => measureCondition(reads, sources, rule.condition, range));
  };
}

async function measureCondition(reads: ConsoleReads, sources: Scope, condition: AlertCondition, range: { from: number; to: number }): Promise<number | null> {
  switch (condition.kind) {
    case 'metric': {
      const result = await reads.metric(sources, { ...condition.query, ...range, stepSeconds: METRIC_STEP_SECONDS });
      return reduceMetric(condition.query.aggregation, result.series);
    }
    case 'log_count': {
      const { kind: _kind, ...filters } = condition;
      return reads.logCount(sources, { ...filters, ...range });
    }
    case 'error_rate':
    case 'latency': {
      const { services } = await reads.servicesHealth(sources, { ...range, services: [condition.service] });
      const health = services.find((service) => service.service === condition.service);
      if (!health || health.requests === 0) return null;
      if (condition.kind === 'error_rate') return health.errorRate;
      return condition.percentile === 50 ? health.p50 : condition.percentile === 95 ? health.p95 : health.p99;
    }
    case 'deploy_regression': {
      const verdicts = await reads.deployVerdicts(sources, { ...range, ...(condition.service ? { services: [condition.service] } : {}) });
      // Deploys of the window judged so far; none at all is no data, not "no regression".
      if (verdicts.length === 0) return null;
      return verdicts.some((view) => view.verdict === 'regression') ? 1 : 0;
    }
  }
}

/**
 * One value for the window from its points: summed for a sum or a count (the window's total),
 * the extreme for min and max, else (averages, rates, percentiles) the mean of the points.
 */
export function reduceMetric(aggregation: string, series: readonly MetricSeries[]): number | null {
  const values = series.flatMap((one) => one.points.map(([, value]) => value)).filter((value): value is number => value !== null && Number.isFinite(value));
  if (values.length === 0) return null;
  switch (aggregation) {
    case 'sum':
    case 'count':
      return values.reduce((total, value) => total + value, 0);
    case 'min':
      return Math.min(...values);
    case 'max':
      return Math.max(...values);
    default:
      return values.reduce((total, value) => total + value, 0) / values.length;
  }
}
