/**
 * Service health on chDB, against figures computed here from the spans sent (the demo's): each
 * service's requests are its server spans; counts and error rates are exact, percentiles within
 * interpolation's reach of the exact ones.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequests, demoTelemetry } from '../../bin/demo.ts';
import { ingestOtlpJson, openQueries, type QueriesFixture } from '../../test/console-queries-fixture.ts';
import { seededRandom } from '../../test/seeded-random.ts';

let fixture: QueriesFixture;
const now = Date.now();
const options = { minutes: 15, requests: 300, now };
const range = { from: now - 3_600_000, to: now + 60_000 };
const spans = demoTelemetry({ ...options, random: seededRandom(21) }).spans;

beforeAll(async () => {
  fixture = await openQueries();
  for (const body of demoRequests({ ...options, random: seededRandom(21) }).traces) await ingestOtlpJson(fixture.engine.storage, 'traces', body, 'src-a');
}, 60_000);
afterAll(() => fixture?.close());

/** The q-quantile of sorted values, interpolated between the two nearest (as ClickHouse's quantile does). */
function quantile(sorted: number[], q: number): number {
  const at = (sorted.length - 1) * q;
  const low = Math.floor(at);
  return sorted[low]! + (sorted[Math.min(low + 1, sorted.length - 1)]! - sorted[low]!) * (at - low);
}

/** What the page should say of `service`, from the spans sent: its server spans (kind 2), optionally of one operation. */
function expected(service: string, operation?: string) {
  const requests = spans.filter((s) => s.service === service && s.kind === 2 && (operation === undefined || s.name === operation));
  const durations = requests.map((s) => Number(s.end - s.start) / 1e6).sort((a, b) => a - b);
  const errors = requests.filter((s) => s.error).length;
  return { requests: requests.length, errors, errorRate: errors / requests.length, perSecond: requests.length / ((range.to - range.from) / 1000), durations };
}

describe('service health', () => {
  it("gives each service's requests, errors and latency as the spans sent say, busiest first", async () => {
    const { services, stepSeconds } = await fixture.queries.servicesHealth(['src-a'], range);
    expect(services.map((s) => s.service).sort()).toEqual(['checkout', 'frontend', 'inventory', 'payment']);
    expect(services.map((s) => s.requests)).toEqual([...services.map((s) => s.requests)].sort((a, b) => b - a));
    for (const health of services) {
      const want = expected(health.service);
      expect(health, health.service).toMatchObject({ requests: want.requests, errors: want.errors });
      expect(health.errorRate).toBeCloseTo(want.errorRate, 10);
      expect(health.perSecond).toBeCloseTo(want.perSecond, 10);
      for (const [q, got] of [[0.5, health.p50], [0.95, health.p95], [0.99, health.p99]] as const) {
        expect(Math.abs(got - quantile(want.durations, q)), `${health.service} p${q * 100}`).toBeLessThanOrEqual(0.02 * quantile(want.durations, q) + 0.01);
      }
      // The steps add up to the whole.
      expect(Math.round(health.series.reduce((n, [, perSecond]) => n + perSecond * stepSeconds, 0)), health.service).toBe(want.requests);
    }
  });

  it("lists one service's operations with their own figures", async () => {
    const { operations } = await fixture.queries.serviceOperations(['src-a'], { ...range, service: 'inventory' });
    expect(operations.map((o) => o.name)).toEqual(['ReserveItems']); // its SELECT spans are client spans: work it does, not requests
    expect(operations[0]).toMatchObject({ requests: expected('inventory', 'ReserveItems').requests, errors: 0 });
  });

  it("reads only the tenant's sources, and refuses a body without a service", async () => {
    expect((await fixture.queries.servicesHealth(['src-b'], range)).services).toEqual([]);
    expect((await fixture.queries.servicesHealth([], range)).services).toEqual([]);
    await expect(fixture.queries.serviceOperations(['src-a'], range as never)).rejects.toThrow(/service/);
  });
});
