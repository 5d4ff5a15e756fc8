import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Bus } from '../bus/bus.ts';
import { createLogger } from '../core/log.ts';
import { ReadGate } from '../core/read-gate.ts';
import { ChdbStorage } from '../storage/chdb.ts';
import { resolveStatementLimits } from '../storage/statement-limits.ts';
import { AttemptLog } from './attempt-log.ts';
import { DeliveryHistory } from './history.ts';
import type { DeliveryJob } from './job.ts';

let dir: string;
let storage: ChdbStorage;
let history: DeliveryHistory;
let attempts: AttemptLog;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-history-'));
  storage = new ChdbStorage(dir, 'otel');
  await storage.start();
  // History rows go straight to storage: what is tested is how they are read back.
  const bus = {
    publish: async (chunks) => {
      for (const chunk of chunks) await storage.insert({ table: chunk.table, columns: chunk.columns, chunks: [chunk.data] });
    },
  } as Pick<Bus, 'publish'> as Bus;
  attempts = new AttemptLog(bus, createLogger('silent'));
  history = new DeliveryHistory(async () => storage, 'otel', new ReadGate());
});
afterAll(async () => {
  await storage?.shutdown();
  await rm(dir, { recursive: true, force: true });
});
afterEach(() => vi.restoreAllMocks());

let jobs = 0;
async function createJob(): Promise<DeliveryJob> {
  const id = `00000000-0000-4000-8000-${String(++jobs).padStart(12, '0')}`;
  await storage.query(`INSERT INTO otel.relay_delivery_jobs (TenantId, JobId, SubmissionId, Kind, Channel, Destination, Subject, Body, CreatedAt)
    VALUES ('t1', '${id}', '', 'notification', 'email', 'team@example.test', 'Hello', '<p>hi</p>', now64(9))`);
  return {
    id, series: 1, tenantId: 't1', siteId: '', formId: '', submissionId: '', kind: 'notification', channel: 'email',
    destination: 'team@example.test', createdAt: new Date().toISOString(), content: { data: {}, subject: 'Hello', body: '<p>hi</p>' },
  };
}

describe('DeliveryHistory', () => {
  it("takes an attempt's outcome as the job's state when it was written in the same millisecond as its start", async () => {
    // A send that fails at once (no SMTP server configured) writes `sending` and `dead` within one clock tick.
    vi.spyOn(Date, 'now').mockReturnValue(Date.parse('2026-11-24T10:00:00.000Z'));
    const job = await createJob();
    await attempts.record(job, 1, 'sending');
    await attempts.record(job, 1, 'dead', { error: 'no SMTP server is configured' });
    const retried = { ...job, series: 2 };
    await attempts.record(retried, 0, 'queued');
    await attempts.record(retried, 1, 'sending');
    await attempts.record(retried, 1, 'failed', { error: 'busy', nextAttemptAt: Date.now() + 1000 });
    await attempts.record(retried, 2, 'sending');
    await attempts.record(retried, 2, 'delivered');

    expect(await history.job('t1', job.id)).toMatchObject({ state: 'delivered', job: { series: 2 } });
    expect((await history.attempts('t1', job.id)).map((a) => `${a.series}:${a.attempt}:${a.state}`)).toEqual([
      '1:1:sending', '1:1:dead', '2:0:queued', '2:1:sending', '2:1:failed', '2:2:sending', '2:2:delivered',
    ]);
  });

  it('reads a job being attempted as sending, and a job without records as queued', async () => {
    const waiting = await createJob();
    expect(await history.job('t1', waiting.id)).toMatchObject({ state: 'queued' });
    vi.spyOn(Date, 'now').mockReturnValue(Date.parse('2026-11-24T10:00:00.000Z'));
    const job = await createJob();
    await attempts.record(job, 1, 'sending');
    await attempts.record(job, 1, 'failed', { nextAttemptAt: Date.now() });
    await attempts.record(job, 2, 'sending');
    expect(await history.job('t1', job.id)).toMatchObject({ state: 'sending' });
  });

  it("lists a form's job once though its rows were written twice (a retried request), with the latest series' error only", async () => {
    const submissionId = '00000000-0000-4000-8000-00000000aaaa';
    const jobId = '00000000-0000-4000-8000-00000000bbbb';
    // A request retried with its Idempotency-Key stores the same rows again.
    for (let i = 0; i < 2; i++) {
      await storage.query(`INSERT INTO otel.relay_submissions (TenantId, SiteId, FormId, SubmissionId, Kind, ReceivedAt, Data, Subject, Body, Ip, Origin, UserAgent, ApiKeyId, Jobs)
        VALUES ('t1', 's1', 'f-listed', '${submissionId}', 'submission', '2026-11-24 10:00:00.000', '{}', '', '', '', '', '', '', 1)`);
      await storage.query(`INSERT INTO otel.relay_delivery_jobs (TenantId, JobId, SubmissionId, Kind, Channel, Destination, Subject, Body, CreatedAt)
        VALUES ('t1', '${jobId}', '${submissionId}', 'submission', 'webhook', 'whk_1', '', '', '2026-11-24 10:00:00.000')`);
    }
    const job: DeliveryJob = {
      id: jobId, series: 1, tenantId: 't1', siteId: 's1', formId: 'f-listed', submissionId, kind: 'submission', channel: 'webhook',
      destination: 'whk_1', createdAt: '2026-11-24T10:00:00.000Z', content: { data: {}, subject: '', body: '' },
    };
    await attempts.record({ ...job, series: 0 }, 0, 'withdrawn', { error: 'not queued: the request was answered with an error' });
    await attempts.record(job, 1, 'sending');
    await attempts.record(job, 1, 'dead', { error: 'http 500 Internal Server Error' });
    expect(await history.jobs('t1', 'f-listed', { limit: 10 })).toMatchObject([{ jobId, state: 'dead', series: 1, lastError: 'http 500 Internal Server Error' }]);

    const retried = { ...job, series: 2 };
    await attempts.record(retried, 0, 'queued');
    await attempts.record(retried, 1, 'sending');
    await attempts.record(retried, 1, 'delivered');
    expect(await history.jobs('t1', 'f-listed', { limit: 10 })).toMatchObject([{ jobId, state: 'delivered', series: 2, attempts: 1, lastError: '' }]);
    expect(await history.created('t1', [jobId])).toHaveLength(1);
  });

  it('reads a job whose request was answered with an error before it was queued as withdrawn', async () => {
    const job = await createJob();
    await attempts.record({ ...job, series: 0 }, 0, 'withdrawn', { error: 'not queued' });
    expect(await history.job('t1', job.id)).toMatchObject({ state: 'withdrawn' });
  });

  it("stops a form's job listing at the statement limits with 422 (it reads all the form's submissions)", async () => {
    // The engine makes the submissions (INSERT ... SELECT): too many to read within a millisecond.
    await storage.query(`INSERT INTO otel.relay_submissions (TenantId, SiteId, FormId, SubmissionId, Kind, ReceivedAt, Data)
      SELECT 't-busy', 's1', 'f-busy', generateUUIDv4(), 'submission', now64(9) - number, '{}' FROM numbers(300000)`);
    const limited = new DeliveryHistory(async () => storage, 'otel', new ReadGate(), resolveStatementLimits({ maxExecutionSeconds: 0.001 }));
    const err = await limited.jobs('t-busy', 'f-busy', { limit: 10 }).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ statusCode: 422, limit: 'time', message: expect.stringMatching(/^The listing ran longer than 0.001 s, the limit, and was stopped\. Ask for fewer jobs/) });
    expect(await history.jobs('t-busy', 'f-busy', { limit: 10 })).toEqual([]);
  });
});
