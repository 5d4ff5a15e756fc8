/**
 * A form's submissions listed and searched on the embedded engine, under the statement limits
 * and the read gate: a search that asks too much of storage is stopped by the engine and
 * answered 422 saying to narrow it; a tenant's searches take turns. The form's rows are made by
 * the engine itself (INSERT ... SELECT from numbers()): enough that no machine searches them
 * within the tiny limits set here.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../core/log.ts';
import { ReadGate } from '../core/read-gate.ts';
import { ChdbStorage } from '../storage/chdb.ts';
import { resolveStatementLimits, type StatementLimits } from '../storage/statement-limits.ts';
import { errorResponse } from './http.ts';
import { SubmissionReader } from './submissions.ts';

const ROWS = 300_000;
let dir: string;
let storage: ChdbStorage;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-submissions-'));
  storage = new ChdbStorage(dir, 'otel');
  await storage.start();
  await storage.query(`INSERT INTO otel.relay_submissions (TenantId, SiteId, FormId, SubmissionId, Kind, ReceivedAt, Data, Subject, Body)
    SELECT 't1', 'site_1', 'form_1', generateUUIDv4(), 'submission', now64(9) - number,
      concat('{"name":"visitor ', toString(number), '","message":"a question about delivery times"}'), '', ''
    FROM numbers(${ROWS})`);
});
afterAll(async () => {
  await storage?.shutdown();
  await rm(dir, { recursive: true, force: true });
});

const reader = (limits: Partial<StatementLimits> = {}, gate = new ReadGate()) => new SubmissionReader(async () => storage, 'otel', gate, resolveStatementLimits(limits));

/** What the relay's API answers for a refused read: status, Retry-After and body. */
async function refusal(promise: Promise<unknown>) {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(Error);
  const response = errorResponse(err, createLogger('silent'));
  return { status: response.status, retryAfter: response.headers?.['retry-after'], body: JSON.parse(String(response.body)) as { message: string; statusCode: number } };
}

describe('a search of a form with many submissions', () => {
  it('is stopped at the time limit and answered 422 saying to narrow it; the next search answers', async () => {
    const refused = await refusal(reader({ maxExecutionSeconds: 0.001 }).list('t1', 'site_1', 'form_1', { q: 'never written' }));
    expect(refused.status).toBe(422);
    expect(refused.body).toEqual({
      statusCode: 422,
      message: 'The search ran longer than 0.001 s, the limit, and was stopped. Narrow the search: look for longer, more specific text, then try again.',
    });
    const found = await reader().list('t1', 'site_1', 'form_1', { q: 'VISITOR 299999', limit: 5 });
    expect(found.submissions.map((s) => s.data)).toEqual([{ name: 'visitor 299999', message: 'a question about delivery times' }]);
  });

  it('is stopped at the rows and memory limits too', async () => {
    const rows = await refusal(reader({ maxRowsToRead: 1000 }).list('t1', 'site_1', 'form_1', { q: 'never written' }));
    expect(rows).toMatchObject({ status: 422, body: { message: expect.stringMatching(/^The search would read more than 1,000 rows, the limit, and was stopped\. Narrow the search/) } });
    // Sorting every match of a common word by time holds them in memory.
    const memory = await refusal(reader({ maxMemoryBytes: 1024 * 1024 }).list('t1', 'site_1', 'form_1', { q: 'delivery' }));
    expect(memory).toMatchObject({ status: 422, body: { message: expect.stringMatching(/^The search needed more than 1 MiB of memory, the limit, and was stopped\./) } });
  });

  it("takes its turn in the read gate: a tenant's searches past its share are refused with 429, another tenant's run", async () => {
    const gate = new ReadGate({ running: 2, waiting: 10, perTenant: 1, perTenantWaiting: 0 });
    const searches = reader({}, gate);
    const first = searches.list('t1', 'site_1', 'form_1', { q: 'visitor 1', limit: 1 });
    const second = refusal(searches.list('t1', 'site_1', 'form_1', { q: 'visitor 2', limit: 1 }));
    const otherTenant = searches.list('t2', 'site_1', 'form_1', { q: 'visitor 3', limit: 1 });
    expect(await second).toEqual({ status: 429, retryAfter: '1', body: { statusCode: 429, message: 'Too many reads at once for this tenant: wait for the ones under way' } });
    expect((await first).submissions).toHaveLength(1);
    expect((await otherTenant).submissions).toEqual([]);
    expect(gate.busyTenants).toBe(0);
  });
});
