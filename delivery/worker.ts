/**
 * DeliveryWorker: takes jobs from the delivery queue, makes one attempt each and decides what
 * comes next. An attempt is recorded when it starts (`sending`) and when it ends: `delivered`;
 * `failed` with the time of the next attempt (transient, attempts left); or `dead` (permanent,
 * or the last attempt of the series). Dead jobs stay in the history for a manual retry.
 *
 * The worker knows channels, not forms: the resolver (the relay's, for its jobs) turns a job into
 * what to send — a rendered email or WhatsApp message with the tenant's settings, or a webhook
 * call with its URL and secrets — at the time of the attempt, so a changed setting (a fixed SMTP
 * password, a rotated webhook secret) counts from the next attempt on. What it resolved goes, with
 * the attempt's identifiers (`outgoing`), to the dispatch: the channels' senders, or the
 * development inbox (delivery/inbox.ts), which keeps it instead of sending it.
 */
import type { Logger } from '../core/log.ts';
import type { AttemptOutcome, RenderedMessage } from './channel.ts';
import type { EmailAddressing, EmailSender, SmtpSettings } from './email.ts';
import type { AttemptLog } from './attempt-log.ts';
import { seriesKey, type DeliveryJob } from './job.ts';
import type { DeliveryQueue, QueuedAttempt, Settlement } from './queue.ts';
import type { RetryPolicy } from './retry-policy.ts';
import type { WebhookDelivery, WebhookSender, WebhookTarget } from './webhook.ts';
import type { WhatsAppSender, WhatsAppSettings } from './whatsapp.ts';

/** What one job sends, as its resolver found it at the time of the attempt. */
export type Resolved =
  | { channel: 'email'; settings: SmtpSettings; message: RenderedMessage }
  | { channel: 'whatsapp'; settings: WhatsAppSettings; message: RenderedMessage }
  | { channel: 'webhook'; target: { url: string; secrets: string[] }; body: string }
  /**
   * It cannot be sent as configured (no SMTP server, a removed webhook): the job goes dead saying
   * why — or, with `retry`, fails for now (a setting this process has not seen yet).
   */
  | { channel: 'none'; error: string; retry?: boolean };

export interface JobResolver {
  resolve(job: DeliveryJob): Promise<Resolved>;
}

/** What one attempt hands over: the resolved message with the identifiers this attempt sends it under. */
export type Outgoing =
  | { channel: 'email'; settings: SmtpSettings; addressing: EmailAddressing; message: RenderedMessage }
  | { channel: 'whatsapp'; settings: WhatsAppSettings; to: string; message: RenderedMessage }
  | { channel: 'webhook'; target: WebhookTarget; delivery: WebhookDelivery };

/** Where an attempt's message goes: out through the channels' senders, or into the development inbox. */
export interface Dispatch {
  dispatch(job: DeliveryJob, outgoing: Outgoing): Promise<AttemptOutcome>;
}

export interface ChannelSenders {
  email: Pick<EmailSender, 'send'>;
  whatsapp: Pick<WhatsAppSender, 'send'>;
  webhook: Pick<WebhookSender, 'send'>;
}

/** Sends every attempt out, each over its channel's sender. */
export function sendingDispatch(senders: ChannelSenders): Dispatch {
  return {
    dispatch(_job, outgoing) {
      switch (outgoing.channel) {
        case 'email':
          return senders.email.send(outgoing.settings, outgoing.addressing, outgoing.message);
        case 'whatsapp':
          return senders.whatsapp.send(outgoing.settings, outgoing.to, outgoing.message);
        case 'webhook':
          return senders.webhook.send(outgoing.target, outgoing.delivery);
      }
    },
  };
}

/** Counted per channel for /metrics. */
export interface DeliveryCounters {
  attempt(channel: string, outcome: 'delivered' | 'failed' | 'dead', seconds: number): void;
}

export interface DeliveryWorkerDeps {
  queue: DeliveryQueue;
  resolver: JobResolver;
  dispatch: Dispatch;
  policy: RetryPolicy;
  history: AttemptLog;
  counters?: DeliveryCounters;
  log: Logger;
}

export class DeliveryWorker {
  constructor(private readonly deps: DeliveryWorkerDeps) {}

  /** Starts taking jobs, at most `concurrency` attempts at once. */
  start(concurrency: number): void {
    this.deps.queue.consume((queued) => this.attempt(queued), concurrency);
  }

  async attempt({ job, attempt }: QueuedAttempt): Promise<Settlement> {
    const { history, policy } = this.deps;
    const started = Date.now();
    // The start is recorded while the attempt runs (a storage commit need not hold up the send);
    // the outcome after it, before the queue forgets the job, so a finished job's history is whole.
    const sending = history.record(job, attempt, 'sending');
    const outcome = await this.send(job).catch((err: unknown): AttemptOutcome => {
      // A bug or a broken setting (a secret sealed under another master key): counted as an attempt, retried, dead in the end.
      this.deps.log.error({ err, job: seriesKey(job) }, 'delivery attempt failed unexpectedly');
      return { kind: 'transient', error: `internal error: ${(err as Error).message}`, providerStatus: 'not sent' };
    });
    const durationMs = Date.now() - started;
    await sending;
    if (outcome.kind === 'delivered') {
      await history.record(job, attempt, 'delivered', { durationMs, providerStatus: outcome.providerStatus });
      this.deps.counters?.attempt(job.channel, 'delivered', durationMs / 1000);
      return { done: true };
    }
    const detail = { durationMs, providerStatus: outcome.providerStatus, error: outcome.error };
    if (outcome.kind === 'transient' && policy.hasNext(attempt)) {
      const retryInMs = policy.delayAfter(attempt, outcome.retryAfterMs);
      await history.record(job, attempt, 'failed', { ...detail, nextAttemptAt: Date.now() + retryInMs });
      this.deps.counters?.attempt(job.channel, 'failed', durationMs / 1000);
      return { retryInMs };
    }
    await history.record(job, attempt, 'dead', detail);
    this.deps.counters?.attempt(job.channel, 'dead', durationMs / 1000);
    this.deps.log.warn({ job: seriesKey(job), channel: job.channel, attempt, error: outcome.error, providerStatus: outcome.providerStatus }, 'delivery job is dead');
    return { done: true };
  }

  private async send(job: DeliveryJob): Promise<AttemptOutcome> {
    const resolved = await this.deps.resolver.resolve(job);
    if (resolved.channel === 'none') return { kind: resolved.retry ? 'transient' : 'permanent', error: resolved.error, providerStatus: 'not sent' };
    return this.deps.dispatch.dispatch(job, outgoing(job, resolved, new Date()));
  }
}

/** What an attempt at `now` hands over for `job`: its Message-ID, webhook-id and time are the same whether it is sent or kept. */
export function outgoing(job: DeliveryJob, resolved: Exclude<Resolved, { channel: 'none' }>, now: Date): Outgoing {
  switch (resolved.channel) {
    case 'email':
      return { channel: 'email', settings: resolved.settings, addressing: { to: job.destination, messageId: messageId(job, resolved.settings.from), jobId: seriesKey(job) }, message: resolved.message };
    case 'whatsapp':
      return { channel: 'whatsapp', settings: resolved.settings, to: job.destination, message: resolved.message };
    case 'webhook':
      return { channel: 'webhook', target: resolved.target, delivery: { id: `msg_${job.id}`, timestamp: now, body: resolved.body } };
  }
}

/** The same Message-ID on every attempt of a job, so a message sent twice (a crash after the 250) is recognisable. */
function messageId(job: DeliveryJob, from: string): string {
  const domain = /@([A-Za-z0-9.-]+)>?\s*$/.exec(from)?.[1] ?? 'sluice.invalid';
  return `<${job.id}@${domain}>`;
}
