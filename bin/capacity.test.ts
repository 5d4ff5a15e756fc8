import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { capacityPlan, costsOf, formatPlan, newestReport, type BenchReport } from './capacity.ts';

/** A report as `npm run bench -- --targets cluster-gateway,cluster-consumer --transcoders js,wasm` writes one (the fields the plan reads). */
const report: BenchReport = {
  date: '2026-11-29T06:30:00.000Z',
  scenario: 'otlp-http-protobuf-gzip',
  rows: [
    { target: 'cluster-gateway', transcoder: 'js', cpu: { items: 1e6, processes: [{ name: 'sluice gateway', perItems: 9, cpuSeconds: 9 }, { name: 'nats-server', perItems: 2, cpuSeconds: 2, server: true }] } },
    { target: 'cluster-gateway', transcoder: 'wasm', cpu: { items: 1e6, processes: [{ name: 'sluice gateway', perItems: 7, cpuSeconds: 7 }, { name: 'nats-server', perItems: 2, cpuSeconds: 2, server: true }] } },
    // The consumer: 2 CPU-s of start-up before its first span, then 3.5 CPU-s per million.
    {
      target: 'cluster-consumer', transcoder: 'wasm', startupCpuSeconds: 2, startupItems: 0,
      cpu: { items: 2e6, processes: [{ name: 'sluice consume', perItems: 4.5, cpuSeconds: 9 }, { name: 'nats-server', perItems: 1, cpuSeconds: 2, server: true }, { name: 'storage (facade)', perItems: 6, cpuSeconds: 12, server: true }] },
    },
  ],
};

describe('capacity', () => {
  it("reads each role's CPU per million spans (the consumer's once started), the WebAssembly row where both transcoders ran", () => {
    expect(costsOf(report)).toEqual({ gateway: 7, consumer: 3.5, nats: 3, storage: 6, measured: '2026-11-29T06:30:00.000Z, otlp-http-protobuf-gzip' });
    expect(() => costsOf({ ...report, rows: report.rows.slice(0, 2) })).toThrow(/cluster-gateway and cluster-consumer/);
    expect(() => costsOf({ ...report, scenario: 'relay-submissions' })).toThrow(/span scenario/);
  });

  it('turns them into cores and processes for a rate: busy cores over the utilisation, whole processes, quorum and spares', () => {
    // 1M spans/s: the gateways keep 7 cores busy, 11.67 at 60 %: 6 processes of 2 cores.
    const [gateway, consumer, nats] = capacityPlan(costsOf(report), { spansPerSecond: 1e6 });
    expect(gateway).toMatchObject({ role: 'gateway', busyCores: 7, processes: 6, coresPerProcess: 2 });
    expect(gateway!.cores).toBeCloseTo(11.67, 2);
    expect(consumer).toMatchObject({ busyCores: 3.5, processes: 6, coresPerProcess: 1 });
    expect(nats).toMatchObject({ role: 'nats-server', busyCores: 3, processes: 3, coresPerProcess: 4 });
    // A trickle still gets two of each stateless role and a JetStream quorum.
    expect(capacityPlan(costsOf(report), { spansPerSecond: 10 }).map((row) => row.processes)).toEqual([2, 2, 3]);
    expect(() => capacityPlan(costsOf(report), { spansPerSecond: 1e6, utilisation: 1.5 })).toThrow(/utilisation/);
    const text = formatPlan(costsOf(report), { spansPerSecond: 1e6 }, capacityPlan(costsOf(report), { spansPerSecond: 1e6 }));
    expect(text).toContain('| gateway | 7 | 7 | 11.7 | 6 × 2 |');
    expect(text).toContain('Total: 30 cores');
  });

  it('finds the newest report with cluster rows, skipping newer ones of other scenarios', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-capacity-'));
    try {
      expect(newestReport(dir)).toBeUndefined();
      await writeFile(join(dir, '2026-11-28T00-00-00-000Z.json'), JSON.stringify(report));
      await writeFile(join(dir, '2026-11-29T00-00-00-000Z.json'), JSON.stringify({ ...report, scenario: 'relay-webhooks' }));
      expect(newestReport(dir)?.path).toBe(join(dir, '2026-11-28T00-00-00-000Z.json'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
