/**
 * A delivery job: one message to one destination over one channel, created with the submission
 * (or notification) that asked for it. It carries what it sends — the submission's data, or a
 * notification's own subject and body — so a worker needs no read of storage to deliver it, and
 * the queue message alone is enough to send after a restart.
 */
export type DeliveryChannel = 'email' | 'whatsapp' | 'webhook';
export const DELIVERY_CHANNELS: readonly DeliveryChannel[] = ['email', 'whatsapp', 'webhook'];

/** What asked for the delivery: a form submission, a notification, or the relay itself (tenant discovery). */
export type JobKind = 'submission' | 'notification' | 'tenant_discovery';

export interface DeliveryJob {
  /** UUID, the same in storage (relay_delivery_jobs) and on the queue. */
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

/** The queue's key of a job's series: a retry is a new entry, never a second copy of the old one. */
export function seriesKey(job: Pick<DeliveryJob, 'id' | 'series'>): string {
  return `${job.id}.${job.series}`;
}

/** States of a job as the admin shows them (the latest record of its latest series decides). */
export type JobState = 'queued' | 'sending' | 'delivered' | 'failed' | 'dead';
export const JOB_STATES: readonly JobState[] = ['queued', 'sending', 'delivered', 'failed', 'dead'];
