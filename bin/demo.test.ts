import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestSluice, type TestSluice } from '../test/harness.ts';
import { demoTelemetry, sendDemo } from './demo.ts';

/** A seeded generator, so the sample's shape is the same on every run. */
function seeded(seed: number): () => number {
  return () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
}

describe('the demo sample', () => {
  it('is a shop whose payment release made checkout slower and failing more often', () => {
    const sample = demoTelemetry({ minutes: 30, requests: 2000, now: Date.UTC(2026, 10, 24, 12), random: seeded(7) });
    const payments = sample.spans.filter((s) => s.service === 'payment');
    const release = BigInt(sample.releaseAt) * 1_000_000n;
    const before = payments.filter((s) => s.start < release);
    const after = payments.filter((s) => s.start >= release);
    const mean = (spans: typeof payments) => spans.reduce((n, s) => n + Number(s.end - s.start) / 1e6, 0) / spans.length;
    const errors = (spans: typeof payments) => spans.filter((s) => s.error).length / spans.length;
    expect(mean(after)).toBeGreaterThan(2 * mean(before));
    expect(errors(after)).toBeGreaterThan(2 * errors(before));
    // Every child span's parent is in its trace; every log points at a span of its trace.
    const ids = new Set(sample.spans.map((s) => `${s.traceId}/${s.spanId}`));
    expect(sample.spans.filter((s) => s.parentSpanId && !ids.has(`${s.traceId}/${s.parentSpanId}`))).toEqual([]);
    expect(sample.logs.filter((l) => !ids.has(`${l.traceId}/${l.spanId}`))).toEqual([]);
    expect(sample.spans.every((s) => s.end > s.start && s.start >= BigInt(sample.from) * 1_000_000n)).toBe(true);
  });
});

describe('sluice demo', () => {
  let sluice: TestSluice;
  beforeAll(async () => {
    sluice = await startTestSluice();
  });
  afterAll(() => sluice?.stop());

  it('lands traces, logs, metrics and deploy markers through the OTLP/HTTP and agent endpoints', async () => {
    const sent = await sendDemo({ url: sluice.baseUrl, apiKey: sluice.apiKey, minutes: 15, requests: 300 });
    const count = async (table: string) => Number((await sluice.rows<{ n: string }>(`SELECT count() AS n FROM otel.${table} WHERE SourceId = '${sluice.sourceId}'`))[0]!.n);
    await eventually(async () => (await count('otel_traces')) === sent.spans && (await count('otel_logs')) === sent.logs, 30_000, 200);
    // A point a minute for 15 minutes: 4 services' durations, checkout's orders.
    expect(await count('otel_metrics_histogram')).toBe(4 * 15);
    expect(await count('otel_metrics_sum')).toBe(15);
    expect(sent.metricPoints).toBe(5 * 15);
    expect(await count('deploy_markers')).toBe(2);
    expect(sent.deploys).toBe(2);
    const services = await sluice.rows<{ ServiceName: string; errors: string }>(
      "SELECT ServiceName, countIf(StatusCode = 'Error') AS errors FROM otel.otel_traces GROUP BY ServiceName ORDER BY ServiceName",
    );
    expect(services.map((s) => s.ServiceName)).toEqual(['checkout', 'frontend', 'inventory', 'payment']);
    expect(Number(services.find((s) => s.ServiceName === 'payment')!.errors)).toBeGreaterThan(0);
  });
});
