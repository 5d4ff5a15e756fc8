/**
 * GET /api/v1/ready reports each component and answers 503 when one cannot do its work;
 * GET /api/v1/health stays the spec's constant liveness answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSluice, type TestSluice } from './harness.ts';

let sluice: TestSluice;

beforeAll(async () => {
  sluice = await startTestSluice();
});
afterAll(async () => sluice?.stop());

const ready = async () => {
  const response = await fetch(`${sluice.baseUrl}/api/v1/ready`);
  return { status: response.status, body: await response.json() };
};

describe('readiness', () => {
  it('is ready when every component is, and lists them', async () => {
    const { status, body } = await ready();
    expect(status).toBe(200);
    expect(body.status).toBe('ready');
    expect(Object.keys(body.components)).toEqual(expect.arrayContaining(['bus', 'descriptors', 'inflight', 'pool', 'storage']));
    expect(body.components.pool.figures.threads).toBe(2);
    // The relay's render threads: one started with the delivery worker.
    expect(body.components['render pool']).toMatchObject({ ok: true, figures: { threads: 1 } });
    for (const [name, component] of Object.entries(body.components)) expect((component as { ok: boolean }).ok, name).toBe(true);
    const metrics = await (await fetch(`${sluice.baseUrl}/metrics`)).text();
    expect(metrics).toContain('sluice_component_ready{component="storage"} 1');
  });

  it('turns 503 naming the component that is down, while health stays ok', async () => {
    await sluice.storage.shutdown(); // the engine closes under the running server
    const { status, body } = await ready();
    expect(status).toBe(503);
    expect(body.status).toBe('not ready');
    expect(body.components.storage).toEqual({ ok: false, detail: 'storage is not started' });
    expect(body.components.bus.ok).toBe(true);
    const health = await fetch(`${sluice.baseUrl}/api/v1/health`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok', service: 'sluice-ingest' }]);
  });
});
