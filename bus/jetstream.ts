/**
 * JetStreamBus: the cluster bus. Rows travel as JetStream messages, one stream per table
 * (WorkQueue retention: a message leaves the stream once a storage consumer acked it).
 * publish() resolves only when JetStream acknowledged every message of the request — that is
 * what a gateway's 2xx promises in cluster mode. Each message carries a msgID, so a publish
 * retried after a lost PubAck is stored once (the stream's duplicate window).
 *
 * Full means refuse, never drop: the streams discard *new* messages at max_bytes, so a publish
 * into a full stream fails and the client gets 503 + Retry-After. (JetStream's default, discard
 * old, deletes the oldest messages — rows already acknowledged — and keeps accepting.) start()
 * checks every existing stream and corrects what it can, or refuses to start saying why.
 *
 * A publish that times out stalls the bus (jetstream-stall.ts): new publishes are refused at
 * once until NATS answers again, the timed-out request's bytes stay reserved in the byte budget
 * until they have left the process, and its messages are withdrawn once NATS answers.
 */
import { randomUUID } from 'node:crypto';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type PubAck } from '@nats-io/jetstream';
import type { Reservation } from '../core/byte-budget.ts';
import { SluiceError } from '../core/errors.ts';
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import type { Bus, BusFigures, ChunkSink, TableChunk } from './bus.ts';
import { JetStreamStorageConsumer, type ConsumerTuning } from './jetstream-consumer.ts';
import { streamOf } from './jetstream-names.ts';
import { ensureWorkQueueStream, isStreamFull, workQueueSettings } from './jetstream-streams.ts';
import { outcomeUnknown, PublishStall } from './jetstream-stall.ts';

export interface JetStreamBusOptions {
  /** Prefix of stream names and subjects, so deployments (or tests) can share a server. Default 'SLUICE'. */
  prefix?: string;
  /** Tables the bus carries: one stream each. */
  tables: readonly string[];
  /** Stream replicas: 3 on a 3-node cluster. Default 1. */
  replicas?: number;
  /** Bytes a stream may hold while consumers catch up; past it publishes are refused (503). */
  maxStreamBytes: number;
  /** How long a PubAck may take before the publish counts as failed. Default 5000 ms. */
  publishTimeoutMs?: number;
  retryAfterSeconds: number;
  /** Consumer tuning (batch size, ack wait, attempts before dead-lettering). */
  consumer?: ConsumerTuning;
  log?: Logger;
}

/** Header room we keep under the server's max_payload. */
const HEADER_ROOM = 4096;

/** How long after a timeout a message can still be withdrawn: the streams' duplicate window (2 min) less a margin. */
const WITHDRAW_WITHIN_MS = 105_000;

/** How long readiness keeps reporting a stream full after a publish was refused for it. */
const FULL_REPORT_MS = 10_000;

export class JetStreamBus implements Bus {
  private readonly js: JetStreamClient;
  private readonly prefix: string;
  private consumer: JetStreamStorageConsumer | undefined;
  /** When a table's stream last refused a publish as full (readiness reports it for a while). */
  private readonly fullAt = new Map<string, number>();
  /** Publishes refused because a stream was full, per table (for /metrics). */
  private readonly fullRefusals = new Map<string, number>();
  /** Publishes that timed out: the bus refuses new ones until NATS answers, then withdraws them. */
  private readonly stall: PublishStall;

  constructor(private readonly nc: NatsConnection, private readonly options: JetStreamBusOptions) {
    this.js = jetstream(nc, { timeout: options.publishTimeoutMs ?? 5000 });
    this.prefix = options.prefix ?? 'SLUICE';
    this.stall = new PublishStall(nc, this.js, { duplicateWindowMs: WITHDRAW_WITHIN_MS, log: options.log });
  }

  /**
   * Creates the streams, or checks the ones there are: settings that can change in place
   * (discard policy, size, replicas, subjects) are corrected with a warning; a stream with
   * another retention or storage cannot be, and start() fails saying what to do.
   * Idempotent: every process may call it.
   */
  async start(): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    for (const table of this.options.tables) {
      const { stream, subject } = streamOf(this.prefix, table);
      await ensureWorkQueueStream(jsm, stream, workQueueSettings(subject, this.options.replicas ?? 1, this.options.maxStreamBytes), this.options.log);
    }
  }

  statuses(): Record<string, ComponentStatus> {
    return { bus: this.status(), ...this.consumer?.statuses() };
  }

  async figures(): Promise<BusFigures> {
    const { withdrawalsPending: pending, withdrawn, notWithdrawn } = this.stall.figures;
    return { fullRefusals: Object.fromEntries(this.fullRefusals), timedOut: { pending, withdrawn, notWithdrawn }, consumer: await this.consumerFigures() };
  }

  /** Not ok while a stream refused a publish as full in the last few seconds, publishes are stalled, or NATS is away. */
  status(): ComponentStatus {
    const recent = [...this.fullAt].filter(([, at]) => Date.now() - at < FULL_REPORT_MS).map(([table]) => table);
    const figures = { fullRefusals: [...this.fullRefusals.values()].reduce((a, b) => a + b, 0), ...this.stall.figures };
    if (this.nc.isClosed()) return { ok: false, detail: 'the NATS connection is closed', figures };
    if (this.stall.stalled) {
      return { ok: false, detail: `stalled for ${this.stall.stalledSeconds} s: a publish got no PubAck in time; publishes are refused with 503 until NATS answers`, figures };
    }
    if (recent.length > 0) return { ok: false, detail: `stream full (max_bytes reached) for ${recent.join(', ')}: publishes are refused with 503`, figures };
    return { ok: true, figures };
  }

  /** Stops consuming after the batch in flight. */
  async shutdown(): Promise<void> {
    this.stall.shutdown();
    await this.consumer?.shutdown();
  }

  /** Figures of this process's storage consumer (undefined if it does not consume). */
  private async consumerFigures(): Promise<{ totals: Record<string, number>; lag: Record<string, number> } | undefined> {
    const consumer = this.consumer;
    if (!consumer) return undefined;
    const lag: Record<string, number> = {};
    for (const table of this.options.tables) lag[table] = await consumer.lag(table).catch(() => -1);
    return { totals: { ...consumer.stats }, lag };
  }

  /** Starts this process's storage consumer on every table stream (`sluice consume`). */
  consume(sink: ChunkSink): void {
    this.consumer = new JetStreamStorageConsumer(this.nc, { ...this.options.consumer, prefix: this.prefix, tables: this.options.tables }, sink);
    this.consumer.start();
  }

  /** Counts a refusal and logs the first of each episode: a full stream refuses many publishes a second. */
  private noteFull(table: string): void {
    const now = Date.now();
    const since = this.fullAt.get(table);
    if (since === undefined || now - since >= FULL_REPORT_MS) {
      this.options.log?.warn({ table }, 'a JetStream stream is full: publishes are refused with 503 until consumers catch up');
    }
    this.fullAt.set(table, now);
    this.fullRefusals.set(table, (this.fullRefusals.get(table) ?? 0) + 1);
  }

  async publish(chunks: readonly TableChunk[], held?: Reservation): Promise<void> {
    const limit = this.nc.info ? this.nc.info.max_payload - HEADER_ROOM : 1024 * 1024 - HEADER_ROOM;
    // Refuse before publishing anything: a request is stored whole or not at all.
    const oversized = chunks.find((chunk) => chunk.data.byteLength > limit);
    if (oversized) {
      throw new SluiceError('payload_too_large', `a row of ${oversized.data.byteLength} bytes exceeds the bus message limit of ${limit} bytes`);
    }
    // A server that does not answer does not read either: writing more would only pile up here.
    if (this.stall.stalled) {
      throw new SluiceError('unavailable', `the bus is stalled: NATS has not answered for ${this.stall.stalledSeconds} s`, { retryAfterSeconds: this.options.retryAfterSeconds });
    }
    const request = randomUUID();
    const messages = chunks.map((chunk, index) => ({
      subject: streamOf(this.prefix, chunk.table).subject,
      msgID: `${request}:${index}`,
      columns: chunk.columns.join(','),
    }));
    const acks = chunks.map((chunk, index) => {
      const h = headers();
      h.set('Sluice-Columns', messages[index]!.columns);
      h.set('Sluice-Rows', String(chunk.rows));
      return this.js.publish(messages[index]!.subject, chunk.data, { msgID: messages[index]!.msgID, headers: h });
    });
    const results = await Promise.allSettled(acks);
    const failures = results.flatMap((result, index) =>
      result.status === 'rejected' ? [{ table: chunks[index]!.table, err: result.reason as unknown }] : [],
    );
    if (failures.length === 0) return;
    if (failures.some(({ err }) => outcomeUnknown(err))) {
      // Sent but unanswered: the bytes may still be queued here and the rows may still arrive.
      // Keep the bytes reserved until NATS answers, then withdraw the whole request.
      this.stall.timedOut(messages, held?.split(held.bytes));
      throw new SluiceError('unavailable', `the bus did not acknowledge the rows in time: ${(failures[0]!.err as Error).message}`, {
        cause: failures[0]!.err,
        retryAfterSeconds: this.options.retryAfterSeconds,
      });
    }
    await this.withdraw(results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : [])));
    const full = failures.filter(({ err }) => isStreamFull(err));
    for (const { table } of full) this.noteFull(table);
    const reason = full.length > 0
      ? 'the bus is full (a JetStream stream reached its max_bytes): storage consumers are behind'
      : `the bus did not acknowledge the rows: ${(failures[0]!.err as Error).message}`;
    throw new SluiceError('unavailable', reason, { cause: failures[0]!.err, retryAfterSeconds: this.options.retryAfterSeconds });
  }

  /**
   * Deletes the messages of a request JetStream took only in part, so a 503 means "nothing
   * stored" and the client's retry is not a duplicate. They are the newest messages of their
   * streams, far behind a consumer that let the stream fill up.
   */
  private async withdraw(acks: PubAck[]): Promise<void> {
    if (acks.length === 0) return;
    const jsm = await jetstreamManager(this.nc);
    for (const ack of acks) {
      await jsm.streams.deleteMessage(ack.stream, ack.seq, false).catch((err) => {
        this.options.log?.error({ stream: ack.stream, seq: ack.seq, err: (err as Error).message }, 'could not withdraw part of a refused request: those rows may be stored');
      });
    }
  }
}
