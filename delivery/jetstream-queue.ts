/**
 * JetStreamDeliveryQueue: the cluster's delivery queue, on two work-queue streams (file storage,
 * discard new: full means refuse, never drop) that every `sluice deliver` shares:
 *
 * - `<P>_DELIVERY_WAITING` holds the jobs not due yet. Intake publishes there, to the tier of no
 *   delay: an enqueue is one message — a job, or the jobs of one submission as a bundle
 *   (job-records.ts) — so it is all or nothing, under a msgID derived from the jobs, so an
 *   enqueue retried within the duplicate window is stored once; this stream full is a 503. A
 *   retry's backoff, and a job whose tenant or destination has no free slot in this process
 *   (DeliveryShares), wait there too. Its subjects are tiers of fixed delay (delay-tiers.ts): a
 *   tier's messages fall due in the order they were published, so its consumer looks at the
 *   oldest only, and moves a due job on — to `<P>_DELIVERY`, or to a shorter tier — splitting a
 *   bundle into a message per job.
 * - `<P>_DELIVERY` holds the jobs that are due; one shared durable consumer hands each to one
 *   process for an attempt. A job that waits is never in its pending window: a nak with a delay
 *   keeps a message there, and ~10,000 of them stopped it for every tenant.
 *
 * Nothing waits for room in a circle: attempts empty the due stream (a retry that finds the
 * waiting stream full is nak'd with its delay instead), and the waiting stream's consumers fill
 * it only as it has room.
 *
 * The attempt number is what the job's header says was used (Sluice-Attempts) plus the message's
 * delivery count. An attempt in progress tells JetStream it is working, so a slow SMTP server
 * does not cause a second delivery; a process killed mid-attempt stops doing so, and ack_wait
 * later hands the job to another worker as the next attempt.
 */
import { setMaxListeners } from 'node:events';
import { jetstream, jetstreamManager, PubHeaders, type Consumer, type JetStreamClient, type JsMsg } from '@nats-io/jetstream';
import { headers as natsHeaders, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { DELIVERY_DURABLE, deliveryStreamOf, deliveryWaitingStreamOf } from '../bus/jetstream-names.ts';
import { ensureDurableConsumer, ensureWorkQueueStream, isStreamFull, workQueueSettings } from '../bus/jetstream-streams.ts';
import { SluiceError } from '../core/errors.ts';
import { derivedUuid } from '../core/hash.ts';
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { sleep, type SupervisedLoop } from '../core/supervisor.ts';
import { DELAY_TIERS, deferralDelay, NEW_JOBS, tierFor, type DelayTier } from './delay-tiers.ts';
import { seriesKey, type DeliveryJob } from './job.ts';
import { addRecord, encodeRecord, jobsOf, QUEUE_CODEC } from './job-records.ts';
import { HANDLER_FAILURE_RETRY_MS, type AttemptHandler, type DeliveryQueue, type Settlement } from './queue.ts';
import { DeliveryShares, isFull, type ShareLimits, type ShareSlot } from './shares.ts';

export interface JetStreamDeliveryQueueOptions {
  /** Prefix of the streams and subjects (SLUICE_NATS_PREFIX). */
  prefix: string;
  replicas: number;
  /** Bytes of jobs each stream may hold; past it, intake answers 503. */
  maxStreamBytes: number;
  /** How long an attempt may go without a sign of life before JetStream hands the job out again. */
  ackWaitMs: number;
  retryAfterSeconds: number;
  shares: ShareLimits;
  /** Runs the pull loops under the process's supervisor (restarted with backoff if they fail). */
  run: (name: string, loop: SupervisedLoop) => void;
  /** How long one pull waits for jobs before the next. Default 5 s; a shutdown ends it at once. */
  pullExpiresMs?: number;
  log: Logger;
}

/**
 * The msgID of what a message becomes when it moves on (`how`: retry, defer, waiting; `part`: a
 * bundle's job), derived from the message's own msgID: the same when a move interrupted is done
 * again, so JetStream stores it once. Not from its sequence: nats-server 2.9 can give a stream's
 * sequences twice (a stream brought back at an earlier sequence after a SIGKILL,
 * nats-io/nats-server#6600), and a second job moved under the same msgID within the duplicate
 * window was taken for the first and dropped. A message without a msgID falls back to its stream and sequence.
 */
function movedId(how: 'retry' | 'defer' | 'waiting', message: JsMsg, part?: number): string {
  const own = message.headers?.get(PubHeaders.MsgIdHdr) || `${message.info.stream}:${message.seq}`;
  return derivedUuid(`delivery ${how}`, own, String(part ?? ''));
}

/** Attempts used before this message (absent: none). */
const ATTEMPTS_HEADER = 'Sluice-Attempts';
/** Times the job waited for a slot since its last attempt: each wait is longer. */
const DEFERRALS_HEADER = 'Sluice-Deferrals';
/** Epoch ms before which a delayed job is not due. */
const NOT_BEFORE_HEADER = 'Sluice-Not-Before';
/** A message holding several jobs (one submission's), to be split. */
const BUNDLE_HEADER = 'Sluice-Bundle';
/** Waiting messages one tier's consumer may hold unacknowledged: the oldest of its tier. */
const TIER_PENDING = 1000;
/** A message this early is due (clocks and timers are not that exact). */
const DUE_SLACK_MS = 20;

export class JetStreamDeliveryQueue implements DeliveryQueue {
  private readonly js: JetStreamClient;
  private readonly ready: { stream: string; subject: string };
  private readonly waiting: ReturnType<typeof deliveryWaitingStreamOf>;
  private readonly shares: DeliveryShares;
  private readonly running = new Set<Promise<void>>();
  /** Aborted by shutdown(): no more pulls, and the ones under way end. */
  private readonly stopping = new AbortController();
  private lastError: string | undefined;
  private lastFullAt = 0;
  /** Why the last pull failed, until one succeeds again: the workers get nothing meanwhile. */
  private pullFailure: string | undefined;
  /** Wakes the due stream's loop waiting for room. */
  private freed: (() => void) | undefined;

  constructor(private readonly nc: NatsConnection, private readonly options: JetStreamDeliveryQueueOptions) {
    this.js = jetstream(nc, { timeout: 5000 });
    this.ready = deliveryStreamOf(options.prefix);
    this.waiting = deliveryWaitingStreamOf(options.prefix);
    this.shares = new DeliveryShares(options.shares);
    // Every pull loop (one per tier, and the due stream's) listens for the stop.
    setMaxListeners(32, this.stopping.signal);
  }

  async start(): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    const { replicas, maxStreamBytes, ackWaitMs, log } = this.options;
    await ensureWorkQueueStream(jsm, this.ready.stream, workQueueSettings(this.ready.subject, replicas, maxStreamBytes), log);
    await ensureWorkQueueStream(jsm, this.waiting.stream, workQueueSettings(this.waiting.subjects, replicas, maxStreamBytes), log);
    // Attempts are counted by the worker (header and delivery count), never cut off by JetStream.
    await ensureDurableConsumer(jsm, this.ready.stream, { name: DELIVERY_DURABLE, ackWaitMs, maxAckPending: 10_000, maxDeliver: -1 });
    for (const tier of [NEW_JOBS, ...DELAY_TIERS]) {
      await ensureDurableConsumer(jsm, this.waiting.stream, { name: this.waiting.durable(tier), filterSubject: this.waiting.subject(tier), ackWaitMs: 30_000, maxAckPending: TIER_PENDING, maxDeliver: -1 });
    }
  }

  async shutdown(): Promise<void> {
    this.stopping.abort();
    while (this.running.size > 0) await Promise.all(this.running);
  }

  async enqueue(jobs: readonly DeliveryJob[]): Promise<void> {
    const unique = [...new Map(jobs.map((job) => [seriesKey(job), job])).values()];
    if (unique.length === 0) return;
    const subject = this.waiting.subject(NEW_JOBS);
    try {
      if (unique.length === 1) await this.js.publish(subject, JSON.stringify(unique[0]), { msgID: seriesKey(unique[0]!) });
      else {
        const body = encodeRecord(addRecord(unique.map((job) => ({ job, attempts: 0, notBefore: 0 }))));
        const h = natsHeaders();
        h.set(BUNDLE_HEADER, String(unique.length));
        await this.js.publish(subject, body, { msgID: `bundle:${seriesKey(unique[0]!)}`, headers: h });
      }
    } catch (err) {
      const full = isStreamFull(err);
      if (full) this.lastFullAt = Date.now();
      const reason = full ? 'the delivery queue is full (its JetStream stream reached max_bytes): delivery workers are behind' : `the delivery queue did not acknowledge the jobs: ${(err as Error).message}`;
      throw new SluiceError('unavailable', reason, { cause: err, retryAfterSeconds: this.options.retryAfterSeconds });
    }
  }

  consume(handle: AttemptHandler, concurrency: number): void {
    this.options.run('delivery.consumer', (context) => this.loop(context.signal, DELIVERY_DURABLE, this.ready.stream, async (consumer, stop) => {
      const room = concurrency - this.running.size;
      if (room <= 0) {
        await this.roomOrStop(stop);
        return;
      }
      await this.pull(consumer, room, stop, (message) => this.take(message, handle));
    }));
    for (const tier of [NEW_JOBS, ...DELAY_TIERS]) {
      this.options.run(`delivery.waiting.${tier.name}`, (context) => this.loop(context.signal, this.waiting.durable(tier), this.waiting.stream, (consumer, stop) => this.releaseDue(consumer, tier, stop)));
    }
  }

  async depth(): Promise<number> {
    const jsm = await jetstreamManager(this.nc);
    const [ready, waiting] = await Promise.all([jsm.streams.info(this.ready.stream), jsm.streams.info(this.waiting.stream)]);
    return ready.state.messages + waiting.state.messages;
  }

  statuses(): Record<string, ComponentStatus> {
    const figures = { attempting: this.running.size };
    if (this.stopping.signal.aborted) return { 'delivery.queue': { ok: false, detail: 'shutting down', figures } };
    if (this.nc.isClosed()) return { 'delivery.queue': { ok: false, detail: 'the NATS connection is closed', figures } };
    if (this.pullFailure) return { 'delivery.queue': { ok: false, detail: `cannot pull jobs from JetStream: ${this.pullFailure}`, figures } };
    if (Date.now() - this.lastFullAt < 10_000) return { 'delivery.queue': { ok: false, detail: 'the delivery queue is full: intake is refused with 503', figures } };
    return { 'delivery.queue': { ok: true, figures, ...(this.lastError ? { detail: `last failure: ${this.lastError}` } : {}) } };
  }

  /** A pull loop on one durable consumer, until the supervisor or shutdown stops it. */
  private async loop(signal: AbortSignal, durable: string, stream: string, step: (consumer: Consumer, stop: AbortSignal) => Promise<void>): Promise<void> {
    const stop = AbortSignal.any([signal, this.stopping.signal]);
    const consumer = await this.js.consumers.get(stream, durable);
    while (!stop.aborted) await step(consumer, stop);
    // Shut down before the supervisor stops (the process's shutdown order): the loop ends with
    // the supervisor, so that it is not taken for a loop that failed and restarted.
    await aborted(signal);
  }

  /**
   * Pulls up to `max` messages, each handed to `take` as it arrives; waits a few seconds at most,
   * and not at all once `signal` is aborted: a message that arrives after that is handed back.
   */
  private async pull(consumer: Consumer, max: number, signal: AbortSignal, take: (message: JsMsg) => void): Promise<void> {
    try {
      const messages = await consumer.fetch({ max_messages: max, expires: this.options.pullExpiresMs ?? 5000 });
      const stop = () => void messages.close();
      if (signal.aborted) stop();
      else signal.addEventListener('abort', stop, { once: true });
      try {
        for await (const message of messages) {
          if (signal.aborted) message.nak();
          else take(message);
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

  /** A message of the due stream: a job attempted if it has a slot here, else it waits for one. */
  private take(message: JsMsg, handle: AttemptHandler): void {
    let job: DeliveryJob;
    try {
      job = JSON.parse(message.string()) as DeliveryJob;
    } catch {
      // Not ours to deliver, and it never will be: drop it from the queue, loudly.
      this.options.log.error({ seq: message.seq }, 'delivery queue: a message is not a job; terminated');
      message.term('not a delivery job');
      return;
    }
    const slot = this.shares.take(job);
    if (isFull(slot)) {
      // No attempt was made; a delivery count past 1 is an attempt a crash cut short.
      const attempts = count(message.headers, ATTEMPTS_HEADER) + message.info.deliveryCount - 1;
      const deferrals = count(message.headers, DEFERRALS_HEADER) + 1;
      this.track(this.delay(message, job, { attempts, deferrals, delayMs: deferralDelay(deferrals), msgID: movedId('defer', message) }));
      return;
    }
    this.track(this.attempt(message, job, slot, handle));
  }

  private track(running: Promise<void>): void {
    const tracked = running.finally(() => {
      this.running.delete(tracked);
      this.freed?.();
    });
    this.running.add(tracked);
  }

  /** Resolves when an attempt (or a move) finishes, or `stop` aborts. */
  private roomOrStop(stop: AbortSignal): Promise<void> {
    if (stop.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        stop.removeEventListener('abort', done);
        this.freed = undefined;
        resolve();
      };
      this.freed = done;
      stop.addEventListener('abort', done, { once: true });
    });
  }

  private async attempt(message: JsMsg, job: DeliveryJob, slot: ShareSlot, handle: AttemptHandler): Promise<void> {
    const attempt = count(message.headers, ATTEMPTS_HEADER) + message.info.deliveryCount;
    // Tell JetStream the attempt is alive, so a long one is not handed to a second worker.
    const alive = setInterval(() => message.working(), Math.max(1000, this.options.ackWaitMs / 3));
    let settlement: Settlement;
    try {
      settlement = await handle({ job, attempt }).catch((err: unknown) => {
        this.options.log.error({ err, job: seriesKey(job) }, 'delivery attempt failed unexpectedly; the job is tried again later');
        return { retryInMs: HANDLER_FAILURE_RETRY_MS };
      });
    } finally {
      clearInterval(alive);
      slot.release();
    }
    if ('retryInMs' in settlement) {
      await this.delay(message, job, { attempts: attempt, deferrals: 0, delayMs: settlement.retryInMs, msgID: movedId('retry', message) });
      return;
    }
    // If this ack is lost the job comes back and may be sent again (at least once): its webhook-id
    // and Message-ID stay the same, so a receiver can tell.
    await this.acknowledge(message, job);
  }

  /**
   * Moves the job to the waiting stream, due in `delayMs`, and acknowledges the message. If the
   * waiting stream cannot take it (full, or NATS away), the message is nak'd with the delay
   * instead: it then waits in the pending window, but it is not lost.
   */
  private async delay(message: JsMsg, job: DeliveryJob, next: { attempts: number; deferrals: number; delayMs: number; msgID: string }): Promise<void> {
    const notBefore = Date.now() + next.delayMs;
    const h = natsHeaders();
    h.set(ATTEMPTS_HEADER, String(next.attempts));
    h.set(DEFERRALS_HEADER, String(next.deferrals));
    h.set(NOT_BEFORE_HEADER, String(notBefore));
    try {
      await this.js.publish(this.waiting.subject(tierFor(next.delayMs)), message.data, { msgID: next.msgID, headers: h });
    } catch (err) {
      this.lastError = (err as Error).message;
      this.options.log.warn({ err: this.lastError, job: seriesKey(job) }, 'delivery queue: could not park a waiting job in the waiting stream; it waits in the pending window');
      message.nak(next.delayMs);
      return;
    }
    await this.acknowledge(message, job);
  }

  /**
   * One pull of a tier's loop: due messages go on (to the due stream, or a shorter tier); one not
   * due yet is handed back to JetStream until it is (a nak with its wait: the tier's consumer
   * holds at most TIER_PENDING of them, the oldest of the tier, and nothing of the due stream).
   */
  private async releaseDue(consumer: Consumer, tier: DelayTier, stop: AbortSignal): Promise<void> {
    const forwarding: Array<Promise<void>> = [];
    await this.pull(consumer, 100, stop, (message) => {
      const wait = message.time.getTime() + tier.ms - Date.now();
      if (wait > DUE_SLACK_MS) message.nak(wait);
      else forwarding.push(this.forward(message));
    });
    await Promise.all(forwarding);
  }

  /**
   * A waiting message whose tier's time has come: due now (to the due stream; a bundle as one
   * message per job), or later (to a shorter tier). Acknowledged once what it became is stored;
   * msgIDs derived from its own (movedId), so a move interrupted and done again stores it once.
   */
  private async forward(message: JsMsg): Promise<void> {
    try {
      if (message.headers?.get(BUNDLE_HEADER)) {
        const jobs = [...jobsOf(QUEUE_CODEC.decode(Buffer.from(message.data))).values()];
        await Promise.all(jobs.map((job, i) => this.js.publish(this.ready.subject, JSON.stringify(job), { msgID: movedId('waiting', message, i) })));
      } else {
        const remaining = count(message.headers, NOT_BEFORE_HEADER) - Date.now();
        const subject = remaining > DUE_SLACK_MS ? this.waiting.subject(tierFor(remaining)) : this.ready.subject;
        const h = natsHeaders();
        for (const name of [ATTEMPTS_HEADER, DEFERRALS_HEADER, NOT_BEFORE_HEADER]) h.set(name, message.headers?.get(name) ?? '0');
        await this.js.publish(subject, message.data, { msgID: movedId('waiting', message), headers: h });
      }
      await message.ackAck();
    } catch (err) {
      // The due stream full (the workers are behind), or NATS away: it waits here meanwhile.
      this.lastError = (err as Error).message;
      this.options.log.warn({ err: this.lastError, seq: message.seq }, 'delivery queue: could not move a due job on; tried again shortly');
      message.nak(1000);
    }
  }

  private async acknowledge(message: JsMsg, job: DeliveryJob): Promise<void> {
    await message.ackAck().catch((err: unknown) => {
      this.lastError = (err as Error).message;
      this.options.log.warn({ err: this.lastError, job: seriesKey(job) }, 'delivery queue: an ack was not confirmed; the job may come back');
    });
  }
}

/** A header holding a whole number (0 when absent or not a number). */
function count(headers: MsgHdrs | undefined, name: string): number {
  const value = Number(headers?.get(name));
  return Number.isSafeInteger(value) && value > 0 ? value : 0;
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
