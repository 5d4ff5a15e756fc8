/**
 * Deploy verdicts on chDB: the demo's two releases (bin/demo.ts) judged from the spans the demo
 * sends: payment 1.9.2 made payment slower and failing more (a regression), inventory 5.0.1
 * changed nothing (no change). And the windows: cut at the service's neighbouring deploys and at
 * now, tenant-scoped, too little traffic is "not enough data".
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequests } from '../../bin/demo.ts';
import { hexId, ingestAgent, ingestOtlp, ingestOtlpJson, ms, openQueries, tracesRequest, type QueriesFixture } from '../../test/console-queries-fixture.ts';
import { VERDICT_WINDOW_MS } from './verdicts.ts';
import { seededRandom } from '../../test/seeded-random.ts';

let fixture: QueriesFixture;
const now = Date.now();
const range = { from: now - 3_600_000, to: now + 60_000 };
const toNanos = (iso: string) => String(BigInt(Date.parse(iso)) * 1_000_000n);

beforeAll(async () => {
  fixture = await openQueries();
  const { storage } = fixture.engine;
  // The demo as `sluice demo` sends it by default: 15 minutes, 300 checkouts.
  const demo = demoRequests({ minutes: 15, requests: 300, now, random: seededRandom(11) });
  for (const body of demo.traces) await ingestOtlpJson(storage, 'traces', body, 'src-demo');
  for (const { timestamp, ...deploy } of demo.deploys) await ingestAgent(storage, 'deploy', { ...deploy, timestamp: toNanos(timestamp) }, 'src-demo', now);

  // A service deployed three times: each window stops at the neighbouring deploys.
  const quiet = (at: number) => ({ traceId: hexId(16), spanId: hexId(8), name: 'GET /', kind: 2, start: ms(at), durationNs: 5_000_000n });
  await ingestOtlp(storage, 'traces', tracesRequest('steady', Array.from({ length: 120 }, (_, i) => quiet(now - 50 * 60_000 + i * 25_000))), 'src-other');
  for (const minutesAgo of [40, 30, 10]) {
    await ingestAgent(storage, 'deploy', { service: 'steady', version: `v${minutesAgo}`, timestamp: String(ms(now - minutesAgo * 60_000)) }, 'src-other', now);
  }
  // A service with a handful of requests.
  await ingestOtlp(storage, 'traces', tracesRequest('tiny', Array.from({ length: 10 }, (_, i) => quiet(now - 20 * 60_000 + i * 60_000))), 'src-other');
  await ingestAgent(storage, 'deploy', { service: 'tiny', version: '2', timestamp: String(ms(now - 15 * 60_000)) }, 'src-other', now);
}, 60_000);
afterAll(() => fixture?.close());

describe('deploy verdicts', () => {
  it("call the demo's payment 1.9.2 a regression and its inventory 5.0.1 no change", async () => {
    const verdicts = await fixture.queries.deployVerdicts(['src-demo'], range, now);
    const of = (service: string) => verdicts.find((v) => v.marker.service === service)!;
    expect(of('payment')).toMatchObject({ verdict: 'regression', marker: { version: '1.9.2' }, latency: { change: 'worse' } });
    expect(of('payment').after.p95).toBeGreaterThan(2 * of('payment').before.p95);
    expect(of('payment').before.requests).toBeGreaterThanOrEqual(100);
    expect(of('inventory')).toMatchObject({ verdict: 'no change', marker: { version: '5.0.1' } });
  });

  it('end each window at the neighbouring deploys of the service and at now', async () => {
    const verdicts = await fixture.queries.deployVerdicts(['src-other'], range, now);
    const steady = (version: string) => verdicts.find((v) => v.marker.service === 'steady' && v.marker.version === version)!;
    const at = (minutesAgo: number) => now - minutesAgo * 60_000;
    expect(steady('v30').before).toMatchObject({ from: at(40), to: at(30) });
    expect(steady('v30').after).toMatchObject({ from: at(30), to: at(10) });
    expect(steady('v10').after).toMatchObject({ from: at(10), to: now });
    expect(steady('v40').before.from).toBe(at(40) - VERDICT_WINDOW_MS);
    // 10 minutes a side at one request per 25 s: 24 requests, under the minimum.
    expect(steady('v30').before.requests).toBe(24);
    expect(verdicts.find((v) => v.marker.service === 'tiny')).toMatchObject({ verdict: 'not enough data' });
  });

  it("read only the tenant's sources", async () => {
    expect((await fixture.queries.deployVerdicts(['src-other'], range, now)).map((v) => v.marker.service)).not.toContain('payment');
    expect(await fixture.queries.deployVerdicts([], range, now)).toEqual([]);
    expect(await fixture.queries.deployVerdicts(['src-nobody'], range, now)).toEqual([]);
  });
});
