/**
 * JetStreamDeliveryQueue: the cluster's delivery queue. Jobs are messages of a work-queue stream
 * (file storage, discard new: full means 503 at intake, never a dropped job), one message per job
 * series with its series key as msgID, so a retried enqueue is stored once. Every `sluice deliver`
 * process pulls from one shared durable consumer: JetStream hands each message to one of them.
 *
 * The attempt number is the message's delivery count. A retry is a nak with the backoff as its
 * delay; done is an acknowledged ack. An attempt in progress tells JetStream it is working, so a
 * slow SMTP server does not cause a second delivery; a process killed mid-attempt stops doing
 * so, and ack_wait later hands the job to another worker as the next attempt.
 */
import { jetstream, jetstreamManager, type Consumer, type JetStreamClient, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { DELIVERY_DURABLE, deliveryStreamOf } from '../bus/jetstream-names.ts';
import { ensureDurableConsumer, ensureWorkQueueStream, isStreamFull, workQueueSettings } from '../bus/jetstream-streams.ts';
import { SluiceError } from '../core/errors.ts';
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { sleep, type SupervisedLoop } from '../core/supervisor.ts';
import { seriesKey, type DeliveryJob } from './job.ts';
import { HANDLER_FAILURE_RETRY_MS, type AttemptHandler, type DeliveryQueue, type Settlement } from './queue.ts';

export interface JetStreamDeliveryQueueOptions {
  /** Prefix of the stream and subject (SLUICE_NATS_PREFIX). */
  prefix: string;
  replicas: number;
  /** Bytes of jobs the stream may hold; past it, intake answers 503. */
  maxStreamBytes: number;
  /** How long an attempt may go without a sign of life before JetStream hands the job out again. */
  ackWaitMs: number;
  retryAfterSeconds: number;
  /** Runs the pull loop under the process's supervisor (restarted with backoff if it fails). */
  run: (name: string, loop: SupervisedLoop) => void;
  /** How long one pull waits for jobs before the next. Default 5 s; a shutdown ends it at once. */
  pullExpiresMs?: number;
  log: Logger;
}

export class JetStreamDeliveryQueue implements DeliveryQueue {
  private readonly js: JetStreamClient;
  private readonly names: { stream: string; subject: string };
  private readonly running = new Set<Promise<void>>();
  /** Aborted by shutdown(): no more pulls, and the one under way ends. */
  private readonly stopping = new AbortController();
  private lastError: string | undefined;
  private lastFullAt = 0;
  /** Why the last pull failed, until one succeeds again: the workers get nothing meanwhile. */
  private pullFailure: string | undefined;

  constructor(private readonly nc: NatsConnection, private readonly options: JetStreamDeliveryQueueOptions) {
    this.js = jetstream(nc, { timeout: 5000 });
    this.names = deliveryStreamOf(options.prefix);
  }

  async start(): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    const { stream, subject } = this.names;
    await ensureWorkQueueStream(jsm, stream, workQueueSettings(subject, this.options.replicas, this.options.maxStreamBytes), this.options.log);
    // Attempts are counted by the worker (the delivery count), never cut off by JetStream.
    await ensureDurableConsumer(jsm, stream, { name: DELIVERY_DURABLE, ackWaitMs: this.options.ackWaitMs, maxAckPending: 10_000, maxDeliver: -1 });
  }

  async shutdown(): Promise<void> {
    this.stopping.abort();
    while (this.running.size > 0) await Promise.all(this.running);
  }

  async enqueue(jobs: readonly DeliveryJob[]): Promise<void> {
    const results = await Promise.allSettled(jobs.map((job) => this.js.publish(this.names.subject, JSON.stringify(job), { msgID: seriesKey(job) })));
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (!failed) return;
    // The jobs that made it stay queued: the caller's retry re-sends them under the same msgIDs.
    const full = isStreamFull(failed.reason);
    if (full) this.lastFullAt = Date.now();
    const reason = full ? 'the delivery queue is full (its JetStream stream reached max_bytes): delivery workers are behind' : `the delivery queue did not acknowledge the jobs: ${(failed.reason as Error).message}`;
    throw new SluiceError('unavailable', reason, { cause: failed.reason, retryAfterSeconds: this.options.retryAfterSeconds });
  }

  consume(handle: AttemptHandler, concurrency: number): void {
    this.options.run('delivery.consumer', async ({ signal }) => {
      const stop = AbortSignal.any([signal, this.stopping.signal]);
      const consumer = await this.js.consumers.get(this.names.stream, DELIVERY_DURABLE);
      while (!stop.aborted) {
        const room = concurrency - this.running.size;
        if (room <= 0) {
          await Promise.race([...this.running, aborted(stop)]);
          continue;
        }
        await this.pull(consumer, room, stop, (message) => this.track(this.attempt(message, handle)));
      }
      // Shut down before the supervisor stops (the process's shutdown order): the loop ends with
      // the supervisor, so that it is not taken for a loop that failed and restarted.
      await aborted(signal);
    });
  }

  async depth(): Promise<number> {
    const jsm = await jetstreamManager(this.nc);
    const info = await jsm.consumers.info(this.names.stream, DELIVERY_DURABLE);
    return info.num_pending + info.num_ack_pending;
  }

  statuses(): Record<string, ComponentStatus> {
    const figures = { attempting: this.running.size };
    if (this.stopping.signal.aborted) return { 'delivery.queue': { ok: false, detail: 'shutting down', figures } };
    if (this.nc.isClosed()) return { 'delivery.queue': { ok: false, detail: 'the NATS connection is closed', figures } };
    if (this.pullFailure) return { 'delivery.queue': { ok: false, detail: `cannot pull jobs from JetStream: ${this.pullFailure}`, figures } };
    if (Date.now() - this.lastFullAt < 10_000) return { 'delivery.queue': { ok: false, detail: 'the delivery stream is full: intake is refused with 503', figures } };
    return { 'delivery.queue': { ok: true, figures, ...(this.lastError ? { detail: `last failure: ${this.lastError}` } : {}) } };
  }

  /**
   * Pulls up to `max` messages, each started as it arrives (its ack_wait runs from then); waits a
   * few seconds at most, and not at all once `signal` is aborted: a job that arrives after that is
   * handed back at once, for the next process.
   */
  private async pull(consumer: Consumer, max: number, signal: AbortSignal, start: (message: JsMsg) => void): Promise<void> {
    try {
      const messages = await consumer.fetch({ max_messages: max, expires: this.options.pullExpiresMs ?? 5000 });
      const stop = () => void messages.close();
      if (signal.aborted) stop();
      else signal.addEventListener('abort', stop, { once: true });
      try {
        for await (const message of messages) {
          if (signal.aborted) message.nak();
          else start(message);
        }
      } finally {
        signal.removeEventListener('abort', stop);
      }
      this.pullFailure = undefined;
    } catch (err) {
      // NATS away or restarting: the client reconnects by itself; pull again shortly.
      this.lastError = this.pullFailure = (err as Error).message;
      this.options.log.warn({ err: this.lastError }, 'delivery queue: pull from JetStream failed; retrying');
      await sleep(1000, signal);
    }
  }

  private track(running: Promise<void>): void {
    const tracked = running.finally(() => this.running.delete(tracked));
    this.running.add(tracked);
  }

  private async attempt(message: JsMsg, handle: AttemptHandler): Promise<void> {
    let job: DeliveryJob;
    try {
      job = JSON.parse(message.string()) as DeliveryJob;
    } catch {
      // Not ours to deliver, and it never will be: drop it from the queue, loudly.
      this.options.log.error({ seq: message.seq }, 'delivery queue: a message is not a job; terminated');
      message.term('not a delivery job');
      return;
    }
    // Tell JetStream the attempt is alive, so a long one is not handed to a second worker.
    const alive = setInterval(() => message.working(), Math.max(1000, this.options.ackWaitMs / 3));
    let settlement: Settlement;
    try {
      settlement = await handle({ job, attempt: message.info.deliveryCount }).catch((err: unknown) => {
        this.options.log.error({ err, job: seriesKey(job) }, 'delivery attempt failed unexpectedly; the job is tried again later');
        return { retryInMs: HANDLER_FAILURE_RETRY_MS };
      });
    } finally {
      clearInterval(alive);
    }
    if ('retryInMs' in settlement) {
      message.nak(settlement.retryInMs);
      return;
    }
    // If this ack is lost the job comes back and may be sent again (at least once): its webhook-id
    // and Message-ID stay the same, so a receiver can tell.
    await message.ackAck().catch((err: unknown) => {
      this.lastError = (err as Error).message;
      this.options.log.warn({ err: this.lastError, job: seriesKey(job) }, 'delivery queue: the ack of a finished job was not confirmed');
    });
  }
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
