/**
 * RelayIntake: stores an accepted submission and queues its delivery jobs. First the rows — one
 * for the submission (relay_submissions) and one per job (relay_delivery_jobs) — in one publish
 * on the bus, the same bus and promise as telemetry (committed to storage embedded, acknowledged
 * by JetStream in a cluster); then the jobs on the delivery queue (delivery/), durable too. The
 * 201 waits for both, and nothing a delivery does later changes it.
 *
 * Queuing is all or nothing (delivery/queue.ts). If the rows are stored and queuing then fails,
 * the caller gets the error (503) and sends again: the stored submission stays, its jobs recorded
 * `withdrawn` — never attempted, and not retryable, since the caller's new request delivers.
 * With an Idempotency-Key the retry is the same submission: its id and time come from the key's
 * first use, its jobs' ids from it and their destinations (delivery/job.ts), so each destination
 * gets it once whichever attempt queued it, and its rows written again are the same rows. (Only
 * a crash between the two steps leaves jobs that show as queued with no attempt.)
 */
import { randomUUID } from 'node:crypto';
import type { Bus } from '../bus/bus.ts';
import type { Reservation } from '../core/byte-budget.ts';
import { derivedUuid } from '../core/hash.ts';
import { jobIdOf, type AttemptLog, type DeliveryJob, type DeliveryQueue, type JobKind } from '../delivery/index.ts';
import { TranscodeOutput } from '../storage/table-rows.ts';
import type { FirstUse } from './idempotency.ts';
import type { Channel } from './model.ts';

export type SubmissionKind = 'submission' | 'notification';

export interface SubmissionRecord {
  tenantId: string;
  siteId: string;
  /** Empty for a notification without a formKey. */
  formId: string;
  kind: SubmissionKind;
  data: Record<string, unknown>;
  /** A notification's sanitised subject and HTML body; empty for form submissions. */
  subject: string;
  body: string;
  meta: { ip: string; origin: string; userAgent: string; apiKeyId: string };
}

/** Where one job delivers: an address of its channel, or a webhook's id. */
export interface JobTarget {
  channel: Channel | 'webhook';
  destination: string;
}

/** A job that carries its own message (not rendered from a submission). */
export interface MessageJob extends JobTarget {
  tenantId: string;
  kind: JobKind;
  subject: string;
  body: string;
}

export class RelayIntake {
  constructor(private readonly bus: Bus, private readonly deliveries: DeliveryQueue, private readonly history: AttemptLog) {}

  /**
   * Stores the submission and queues its jobs; resolves with its id once both are durable.
   * `firstUse` (an Idempotency-Key's) names the request across its retries: the submission's id
   * and time come from it, else they are new.
   */
  async store(record: SubmissionRecord, targets: readonly JobTarget[], held?: Reservation, firstUse?: FirstUse): Promise<string> {
    const submissionId = firstUse ? derivedUuid('submission', firstUse.id) : randomUUID();
    const receivedAt = firstUse ? BigInt(firstUse.at) * 1_000_000n : nowNanos();
    // One content for all the jobs (a queue writes it once); a destination named twice gets it once.
    const content = { data: record.data, subject: record.subject, body: record.body };
    const destinations = [...new Map(targets.map((target) => [`${target.channel} ${target.destination}`, target])).values()];
    const jobs = destinations.map((target): DeliveryJob => ({
      ...newJob(submissionId, record.tenantId, record.kind, target, receivedAt),
      siteId: record.siteId,
      formId: record.formId,
      submissionId,
      content,
    }));
    const out = new TranscodeOutput();
    const rows = out.table('relay_submissions');
    const w = rows.writer;
    for (const value of [record.tenantId, record.siteId, record.formId]) w.string(value);
    w.uuid(submissionId);
    w.string(record.kind);
    w.dateTime64(receivedAt);
    for (const value of [JSON.stringify(record.data), record.subject, record.body]) w.string(value);
    for (const value of [record.meta.ip, record.meta.origin, record.meta.userAgent, record.meta.apiKeyId]) w.string(value);
    w.u32(jobs.length);
    rows.endRow();
    writeJobs(out, jobs);
    await this.bus.publish(out.finish().tables, held);
    await this.enqueue(jobs);
    return submissionId;
  }

  /** Queues jobs that carry their own message (tenant discovery): durable when this resolves. */
  async queue(messages: readonly MessageJob[]): Promise<void> {
    const createdAt = nowNanos();
    const origin = randomUUID();
    const jobs = messages.map((message): DeliveryJob => ({
      ...newJob(origin, message.tenantId, message.kind, message, createdAt),
      siteId: '',
      formId: '',
      submissionId: '',
      content: { data: {}, subject: message.subject, body: message.body },
    }));
    const out = new TranscodeOutput();
    writeJobs(out, jobs);
    await this.bus.publish(out.finish().tables);
    await this.enqueue(jobs);
  }

  /** Queues stored jobs, all or none; when none, they are recorded withdrawn and the caller's answer is the error. */
  private async enqueue(jobs: DeliveryJob[]): Promise<void> {
    try {
      await this.deliveries.enqueue(jobs);
    } catch (err) {
      const error = `not queued: the request was answered with an error, for its client to send again (${(err as Error).message})`;
      // Series 0: before any series, so a retry with the request's key that queues it (series 1) supersedes it whole.
      await Promise.all(jobs.map((job) => this.history.record({ ...job, series: 0 }, 0, 'withdrawn', { error, providerStatus: 'not queued' })));
      throw err;
    }
  }
}

/** A job's own fields; its id from what asked for it (`origin`) and its destination. */
function newJob(origin: string, tenantId: string, kind: JobKind, target: JobTarget, createdAt: bigint) {
  const { channel, destination } = target;
  return { id: jobIdOf(origin, channel, destination), series: 1, tenantId, kind, channel, destination, createdAt: new Date(Number(createdAt / 1_000_000n)).toISOString() };
}

function writeJobs(out: TranscodeOutput, jobs: readonly DeliveryJob[]): void {
  if (jobs.length === 0) return;
  const rows = out.table('relay_delivery_jobs');
  const w = rows.writer;
  for (const job of jobs) {
    w.string(job.tenantId);
    w.uuid(job.id);
    // A submission's message is rendered from its row; a job with its own message keeps it here.
    const own = job.submissionId === '' ? job.content : { subject: '', body: '' };
    for (const value of [job.submissionId, job.kind, job.channel, job.destination, own.subject, own.body]) w.string(value);
    w.dateTime64(BigInt(Date.parse(job.createdAt)) * 1_000_000n);
    rows.endRow();
  }
}

function nowNanos(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}
