/**
 * RelayIntake: stores an accepted submission and queues its delivery jobs, in one publish on the
 * bus — the same bus and the same promise as telemetry: it resolves once the rows are durable
 * (committed to storage embedded, acknowledged by JetStream in a cluster), which is what a 201
 * tells the caller. One row for the submission (relay_submissions) and one per job
 * (relay_delivery_jobs); the jobs are delivered by the relay's delivery workers, and nothing a
 * delivery does later changes the answer already given.
 */
import { randomUUID } from 'node:crypto';
import type { Bus } from '../bus/bus.ts';
import type { Reservation } from '../core/byte-budget.ts';
import type { RowBinaryWriter } from '../pipeline/otlp/rowbinary.ts';
import { TranscodeOutput } from '../pipeline/otlp/output.ts';
import type { Channel } from './model.ts';

export type SubmissionKind = 'submission' | 'notification';
export type JobKind = SubmissionKind | 'tenant_discovery';

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
  constructor(private readonly bus: Bus) {}

  /** Stores the submission and its jobs; resolves with its id once both are durable. */
  async store(record: SubmissionRecord, targets: readonly JobTarget[], held?: Reservation): Promise<string> {
    const submissionId = randomUUID();
    const receivedAt = nowNanos();
    const out = new TranscodeOutput();
    const rows = out.table('relay_submissions');
    const w = rows.writer;
    for (const value of [record.tenantId, record.siteId, record.formId]) w.string(value);
    uuid(w, submissionId);
    w.string(record.kind);
    dateTime64(w, receivedAt);
    for (const value of [JSON.stringify(record.data), record.subject, record.body]) w.string(value);
    for (const value of [record.meta.ip, record.meta.origin, record.meta.userAgent, record.meta.apiKeyId]) w.string(value);
    w.u32(targets.length);
    rows.endRow();
    const jobs = targets.map((target) => ({ ...target, tenantId: record.tenantId, kind: record.kind, subject: '', body: '' }));
    writeJobs(out, jobs, submissionId, receivedAt);
    await this.bus.publish(out.finish().tables, held);
    return submissionId;
  }

  /** Queues jobs that carry their own message (tenant discovery): durable when this resolves. */
  async queue(jobs: readonly MessageJob[]): Promise<void> {
    const out = new TranscodeOutput();
    writeJobs(out, jobs, '', nowNanos());
    await this.bus.publish(out.finish().tables);
  }
}

function writeJobs(out: TranscodeOutput, jobs: readonly MessageJob[], submissionId: string, createdAt: bigint): void {
  if (jobs.length === 0) return;
  const rows = out.table('relay_delivery_jobs');
  const w = rows.writer;
  for (const job of jobs) {
    w.string(job.tenantId);
    uuid(w, randomUUID());
    for (const value of [submissionId, job.kind, job.channel, job.destination, job.subject, job.body]) w.string(value);
    dateTime64(w, createdAt);
    rows.endRow();
  }
}

function nowNanos(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

function dateTime64(w: RowBinaryWriter, nanos: bigint): void {
  w.u64(Number(nanos & 0xffffffffn), Number(nanos >> 32n));
}

/** RowBinary UUID: its two 64-bit halves, each little-endian, high half first. */
function uuid(w: RowBinaryWriter, id: string): void {
  const bytes = Buffer.from(id.replaceAll('-', ''), 'hex');
  w.bytes(bytes.subarray(0, 8).reverse());
  w.bytes(bytes.subarray(8, 16).reverse());
}
