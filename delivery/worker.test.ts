import { describe, expect, it } from 'vitest';
import { createLogger } from '../core/log.ts';
import type { AttemptLog } from './attempt-log.ts';
import type { AttemptOutcome } from './channel.ts';
import type { DeliveryJob, JobState } from './job.ts';
import type { DeliveryQueue } from './queue.ts';
import { testJob } from './queue.suite.ts';
import { RetryPolicy } from './retry-policy.ts';
import { DeliveryWorker, sendingDispatch, type ChannelSenders, type Resolved } from './worker.ts';

/** A worker whose webhook sender answers `outcomes` in turn, and whose history is a list. */
function workerWith(options: { outcomes?: AttemptOutcome[]; resolve?: (job: DeliveryJob) => Promise<Resolved> }) {
  const records: Array<{ attempt: number; state: JobState; error?: string; nextAttemptAt?: number }> = [];
  const history = { record: async (_job: DeliveryJob, attempt: number, state: JobState, detail: { error?: string; nextAttemptAt?: number } = {}) => void records.push({ attempt, state, ...detail }) };
  const outcomes = [...(options.outcomes ?? [])];
  const senders = { webhook: { send: async () => outcomes.shift()! } } as unknown as ChannelSenders;
  const worker = new DeliveryWorker({
    queue: {} as DeliveryQueue,
    resolver: { resolve: options.resolve ?? (async () => ({ channel: 'webhook', target: { url: 'https://example.com/', secrets: [] }, body: '{}' })) },
    dispatch: sendingDispatch(senders),
    policy: new RetryPolicy({ attempts: 3, baseDelayMs: 1000, maxDelayMs: 60_000 }, () => 1),
    history: history as unknown as AttemptLog,
    log: createLogger('silent'),
  });
  return { worker, records };
}

const delivered: AttemptOutcome = { kind: 'delivered', providerStatus: 'http 204' };
const busy: AttemptOutcome = { kind: 'transient', error: 'busy', providerStatus: 'http 503', retryAfterMs: 5000 };

describe('DeliveryWorker', () => {
  it('records the attempt when it starts and when it is delivered, and ends the job', async () => {
    const { worker, records } = workerWith({ outcomes: [delivered] });
    expect(await worker.attempt({ job: testJob(), attempt: 1 })).toEqual({ done: true });
    expect(records.map((r) => r.state)).toEqual(['sending', 'delivered']);
  });

  it('schedules a transient failure no sooner than its Retry-After, and makes the last attempt dead', async () => {
    const { worker, records } = workerWith({ outcomes: [busy, busy] });
    const settlement = await worker.attempt({ job: testJob(), attempt: 2 });
    expect(settlement).toEqual({ retryInMs: 5000 });
    expect(records[1]).toMatchObject({ state: 'failed', error: 'busy' });
    expect(records[1]!.nextAttemptAt).toBeGreaterThan(Date.now());
    expect(await worker.attempt({ job: testJob(), attempt: 3 })).toEqual({ done: true });
    expect(records.map((r) => r.state)).toEqual(['sending', 'failed', 'sending', 'dead']);
  });

  it('makes a permanent failure dead at the first attempt', async () => {
    const { worker, records } = workerWith({ outcomes: [{ kind: 'permanent', error: 'gone', providerStatus: 'http 410' }] });
    expect(await worker.attempt({ job: testJob(), attempt: 1 })).toEqual({ done: true });
    expect(records[1]).toMatchObject({ state: 'dead', error: 'gone' });
  });

  it('makes a job that cannot be sent as configured dead, saying why', async () => {
    const { worker, records } = workerWith({ resolve: async () => ({ channel: 'none', error: 'the webhook is inactive' }) });
    expect(await worker.attempt({ job: testJob(), attempt: 1 })).toEqual({ done: true });
    expect(records[1]).toMatchObject({ state: 'dead', error: 'the webhook is inactive' });
  });

  it('retries a job whose configuration this process has not seen yet', async () => {
    const { worker, records } = workerWith({ resolve: async () => ({ channel: 'none', error: 'not known here yet', retry: true }) });
    expect(await worker.attempt({ job: testJob(), attempt: 1 })).toEqual({ retryInMs: 1000 });
    expect(records[1]).toMatchObject({ state: 'failed', error: 'not known here yet' });
  });

  it('counts a resolver that throws as a failed attempt, never as an escaped error', async () => {
    const { worker, records } = workerWith({ resolve: async () => { throw new Error('cannot open the secret'); } });
    expect(await worker.attempt({ job: testJob(), attempt: 1 })).toEqual({ retryInMs: 1000 });
    expect(records[1]).toMatchObject({ state: 'failed', error: 'internal error: cannot open the secret' });
  });
});
