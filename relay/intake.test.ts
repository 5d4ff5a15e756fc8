import { describe, expect, it } from 'vitest';
import type { Bus, TableChunk } from '../bus/bus.ts';
import { SluiceError } from '../core/errors.ts';
import { createLogger } from '../core/log.ts';
import { AttemptLog } from '../delivery/attempt-log.ts';
import type { DeliveryJob } from '../delivery/job.ts';
import type { DeliveryQueue } from '../delivery/queue.ts';
import { RelayIntake, type SubmissionRecord } from './intake.ts';

/** A bus that keeps what it was given, and a queue that takes or refuses. */
function intakeWith(refuse: boolean) {
  const published: TableChunk[][] = [];
  const bus = { publish: async (chunks: readonly TableChunk[]) => void published.push([...chunks]) } as unknown as Bus;
  const queued: DeliveryJob[] = [];
  const queue = {
    enqueue: async (jobs: readonly DeliveryJob[]) => {
      if (refuse) throw new SluiceError('unavailable', 'the delivery queue is full', { retryAfterSeconds: 5 });
      queued.push(...jobs);
    },
  } as unknown as DeliveryQueue;
  const intake = new RelayIntake(bus, queue, new AttemptLog(bus, createLogger('silent')));
  return { intake, published, queued };
}

const record: SubmissionRecord = {
  tenantId: 't1', siteId: 's1', formId: 'f1', kind: 'submission', data: { name: 'Ada' }, subject: '', body: '',
  meta: { ip: '198.51.100.7', origin: 'https://www.example.com', userAgent: 'test', apiKeyId: '' },
};
const targets = [{ channel: 'email' as const, destination: 'a@example.com' }, { channel: 'webhook' as const, destination: 'whk_1' }];

describe('RelayIntake', () => {
  it('stores the submission and its jobs, then queues the same jobs with their content', async () => {
    const { intake, published, queued } = intakeWith(false);
    const submissionId = await intake.store(record, targets);
    expect(published[0]!.map((chunk) => [chunk.table, chunk.rows])).toEqual([['relay_submissions', 1], ['relay_delivery_jobs', 2]]);
    expect(queued.map((job) => [job.channel, job.destination, job.series, job.submissionId])).toEqual([
      ['email', 'a@example.com', 1, submissionId],
      ['webhook', 'whk_1', 1, submissionId],
    ]);
    expect(queued[0]!.content).toEqual({ data: { name: 'Ada' }, subject: '', body: '' });
  });

  it('answers the queue\'s error when the jobs cannot be queued, and records the stored jobs withdrawn saying so', async () => {
    const { intake, published } = intakeWith(true);
    const refused = await intake.store(record, targets).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(SluiceError);
    expect((refused as SluiceError).retryAfterSeconds).toBe(5);
    expect(published.map((chunks) => chunks.map((chunk) => chunk.table).join(','))).toEqual([
      'relay_submissions,relay_delivery_jobs',
      'relay_delivery_attempts',
      'relay_delivery_attempts',
    ]);
    const text = Buffer.from(published[1]![0]!.data).toString('latin1');
    expect(text).toContain('withdrawn');
    expect(text).toContain('not queued: the request was answered with an error, for its client to send again (the delivery queue is full)');
  });

  it('makes the same submission and the same jobs again for the same first use of an Idempotency-Key, and others for another', async () => {
    const { intake, queued } = intakeWith(false);
    const firstUse = { id: 'scope-key.1764340000000', at: 1764340000000 };
    const first = await intake.store(record, targets, undefined, firstUse);
    const again = await intake.store(record, targets, undefined, firstUse);
    const other = await intake.store(record, targets, undefined, { ...firstUse, id: 'scope-other.1764340000000' });
    expect(again).toBe(first);
    expect(other).not.toBe(first);
    const ids = queued.map((job) => job.id);
    expect(ids.slice(2, 4)).toEqual(ids.slice(0, 2));
    expect(new Set(ids).size).toBe(4);
    expect(queued[0]!.createdAt).toBe(new Date(firstUse.at).toISOString());
  });

  it('queues a destination named twice once, every job sharing one content', async () => {
    const { intake, queued } = intakeWith(false);
    await intake.store(record, [...targets, targets[0]!]);
    expect(queued.map((job) => job.destination)).toEqual(['a@example.com', 'whk_1']);
    expect(queued[0]!.content).toBe(queued[1]!.content);
  });
});
