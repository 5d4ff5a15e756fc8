/**
 * A delivery job: one message to one destination over one channel, created with the submission
 * (or notification) that asked for it. It carries what it sends — the submission's data, or a
 * notification's own subject and body — so a worker needs no read of storage to deliver it, and
 * the queue message alone is enough to send after a restart.
 *
 * A job's id is derived, not minted: from the submission and the destination (jobIdOf). A client
 * retrying with its Idempotency-Key, a process restarting, an admin retrying: every path names
 * the job the same, and a queue that already holds its series does not take it twice.
 */
import { derivedUuid } from '../core/hash.ts';

export type DeliveryChannel = 'email' | 'whatsapp' | 'webhook';
export const DELIVERY_CHANNELS: readonly DeliveryChannel[] = ['email', 'whatsapp', 'webhook'];

/** What asked for the delivery: a form submission, a notification, or the relay itself (tenant discovery). */
export type JobKind = 'submission' | 'notification' | 'tenant_discovery';

export interface DeliveryJob {
  /** UUID (jobIdOf), the same in storage (relay_delivery_jobs) and on the queue. */
  id: string;
  /** 1 for the job as created; each manual retry of a dead job starts the next series. */
  series: number;
  tenantId: string;
  siteId: string;
  /** Empty for a notification without a form and for tenant discovery. */
  formId: string;
  /** Empty for tenant discovery. */
  submissionId: string;
  kind: JobKind;
  channel: DeliveryChannel;
  /** An email address, an E.164 number, or a webhook's id. */
  destination: string;
  /** ISO time the submission was received. */
  createdAt: string;
  /** The submission's data; a notification's (sanitised) subject and HTML body when it set them. */
  content: { data: Record<string, unknown>; subject: string; body: string };
}

/** The id of the job that sends what `origin` (a submission's id) asked for to one destination. */
export function jobIdOf(origin: string, channel: DeliveryChannel, destination: string): string {
  return derivedUuid('delivery job', origin, channel, destination);
}

/** The queue's key of a job's series: a retry is a new entry, never a second copy of the old one. */
export function seriesKey(job: Pick<DeliveryJob, 'id' | 'series'>): string {
  return `${job.id}.${job.series}`;
}

/**
 * States of a job as the admin shows them (the latest record of its latest series decides).
 * `withdrawn`: its request was answered with an error before the job was queued, so its client
 * knows to send again; it is never attempted and cannot be retried (that would be a second copy).
 */
export type JobState = 'queued' | 'sending' | 'delivered' | 'failed' | 'dead' | 'withdrawn';
export const JOB_STATES: readonly JobState[] = ['queued', 'sending', 'delivered', 'failed', 'dead', 'withdrawn'];
