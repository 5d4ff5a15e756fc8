/**
 * JetStreamBus: the cluster bus. Rows travel as JetStream messages, one stream per table
 * (WorkQueue retention: a message leaves the stream once a storage consumer acked it).
 * publish() resolves only when JetStream acknowledged every message holding the request's rows —
 * that is what a gateway's 2xx promises in cluster mode. Each message carries a msgID, so a
 * publish retried after a lost PubAck is stored once (the stream's duplicate window).
 *
 * Messages are filled by several requests: the rows of one table published in the same turn of
 * the event loop go out as one message of up to about 1 MiB (sent when full, or at the end of
 * the turn: no timer, so a lone request waits for nothing), written part by part to a NATS
 * connection of the bus's own, the requests' rows never joined into one buffer
 * (jetstream-publisher.ts). One PubAck then covers many requests, and the consumer inserts few
 * large messages. A request is stored whole or not at all: requests with rows in more than one
 * message tie those messages together, and a group of tied messages succeeds or fails as one —
 * a refused message fails every request in its group, and the group's messages JetStream took
 * are withdrawn.
 *
 * A table's rows may go to several partition streams (SLUICE_NATS_PARTITIONS), so its writes
 * spread over several stream leaders: each new message goes to the table's next partition in
 * turn, passing over one that refused a publish as full moments ago while another has room.
 * Round robin by message, not a hash of the request: rows have no order to keep, and turns
 * spread the bytes evenly whatever the sources' sizes. Consumers pull from every partition.
 *
 * Full means refuse, never drop: the streams discard *new* messages at max_bytes, so a publish
 * into a full stream fails and the client gets 503 + Retry-After. (JetStream's default, discard
 * old, deletes the oldest messages — rows already acknowledged — and keeps accepting.) start()
 * checks every existing stream and corrects what it can, or refuses to start saying why.
 *
 * A publish that times out stalls the bus (jetstream-stall.ts): new publishes are refused at
 * once until NATS answers again, the timed-out requests' bytes stay reserved in the byte budget
 * until they have left the process, and their messages are withdrawn once NATS answers.
 */
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, PubHeaders, type JetStreamClient, type JetStreamManager, type PubAck } from '@nats-io/jetstream';
import type { Reservation } from '../core/byte-budget.ts';
import { SluiceError } from '../core/errors.ts';
import { noStreamYet, streamNotFound } from '../core/jetstream-errors.ts';
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { sameColumns, type Bus, type BusFigures, type ChunkSink, type TableChunk } from './bus.ts';
import { JetStreamStorageConsumer, type ConsumerTuning } from './jetstream-consumer.ts';
import { PARTS_HEADER, streamOf } from './jetstream-names.ts';
import { JetStreamPublisher } from './jetstream-publisher.ts';
import { ensureWorkQueueStream, isStreamFull, spreadLeaders, workQueueSettings } from './jetstream-streams.ts';
import { deleteIfOurs, outcomeUnknown, PublishStall } from './jetstream-stall.ts';
import { NatsDirect } from './nats-direct.ts';

export interface JetStreamBusOptions {
  /** Prefix of stream names and subjects, so deployments (or tests) can share a server. Default 'SLUICE'. */
  prefix?: string;
  /** Tables the bus carries: one stream per partition each. */
  tables: readonly string[];
  /** Partition streams per table (bus/jetstream-names.ts parsePartitions). Default: one each. */
  partitions?: ReadonlyMap<string, number>;
  /** NATS_URL: the bus publishes, and its consumer pulls, on a connection of its own to its servers (nats-direct.ts). */
  natsUrl: string;
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

/** Header room we keep under the server's max_payload (the parts list is the largest header). */
const HEADER_ROOM = 8192;

/**
 * Requests' rows a message holds at most: each is a part in its `Sluice-Parts` header (bytes:rows),
 * so a consumer can store the others when storage refuses one request's rows.
 */
const MAX_PARTS = 256;

/**
 * A message is sent once it holds this many bytes: large enough that per-message costs
 * (PubAck, headers, the consumer's ack and manifest entry) are small per row.
 */
const MESSAGE_TARGET_BYTES = 1024 * 1024;

/** At most this share of a stream's max_bytes per message, so a nearly full stream still takes small messages. */
const STREAM_SHARE = 16;

/** A message being filled or awaiting its PubAck: rows of one table, from one or more requests. */
interface Message {
  table: string;
  /** The partition stream it goes to. */
  stream: string;
  subject: string;
  /** The column list of its rows, and its header form. */
  columnList: readonly string[];
  columns: string;
  msgID: string;
  chunks: Uint8Array[];
  /** Per chunk (one request's rows each), `bytes:rows`. */
  parts: string[];
  bytes: number;
  rows: number;
  group: Group;
  ack?: PubAck;
  err?: unknown;
}

/** A publish() waiting for the PubAcks of the messages holding its rows. */
interface Waiter {
  resolve(): void;
  reject(err: unknown): void;
  held?: Reservation;
}

/**
 * Messages tied by requests with rows in more than one of them, and those requests. They are
 * settled together once none of the messages is open or awaiting its PubAck; no request can
 * join a group then (requests join open messages only).
 */
interface Group {
  messages: Message[];
  requests: Waiter[];
  unsettled: number;
}

/** How long after a timeout a message can still be withdrawn: the streams' duplicate window (2 min) less a margin. */
const WITHDRAW_WITHIN_MS = 105_000;

/** How long readiness keeps reporting a stream full after a publish was refused for it. */
const FULL_REPORT_MS = 10_000;
/**
 * How long requests for a table are refused before they are decoded after its stream refused a
 * publish as full. Room comes back as consumers ack, which a gateway does not see: it looks again
 * by letting requests through once this has passed. Without the hold, a gateway whose consumers
 * are behind decoded every request and then refused it.
 */
const FULL_HOLD_MS = 250;
const STREAM_FULL = 'the bus is full (a JetStream stream reached its max_bytes): storage consumers are behind';

export class JetStreamBus implements Bus {
  private readonly js: JetStreamClient;
  private readonly prefix: string;
  private consumer: JetStreamStorageConsumer | undefined;
  /** When a partition stream last refused a publish as full (readiness reports it for a while), by stream. */
  private readonly fullAt = new Map<string, number>();
  /** The partition each table's next message goes to. */
  private readonly turn = new Map<string, number>();
  /** Each table's partition streams, by partition. */
  private readonly partitionStreams: ReadonlyMap<string, ReadonlyArray<{ stream: string; subject: string }>>;
  /** Publishes refused because a stream was full, per table (for /metrics). */
  private readonly fullRefusals = new Map<string, number>();
  /** Publishes that timed out: the bus refuses new ones until NATS answers, then withdraws them. */
  private readonly stall: PublishStall;
  /** The bus's own connection for its publishes and its consumer's pulls; nats.js's (nc) for everything else. */
  private readonly direct: NatsDirect;
  private readonly publisher: JetStreamPublisher;
  /** Publishes awaiting their PubAck, so shutdown() can let them finish before closing the connection. */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** The message being filled, per table. */
  private readonly open = new Map<string, Message>();
  private flushScheduled = false;
  /** msgIDs are this bus's id and a count: unique per message, and cheap. */
  private readonly id = randomUUID();
  private sent = 0;
  private jsm: JetStreamManager | undefined;

  constructor(private readonly nc: NatsConnection, private readonly options: JetStreamBusOptions) {
    const timeout = options.publishTimeoutMs ?? 5000;
    this.js = jetstream(nc, { timeout });
    this.prefix = options.prefix ?? 'SLUICE';
    const prefix = this.prefix;
    this.partitionStreams = new Map(options.tables.map((table) => [table, Array.from({ length: options.partitions?.get(table) ?? 1 }, (_, p) => streamOf(prefix, table, p))]));
    this.stall = new PublishStall(nc, this.js, { duplicateWindowMs: WITHDRAW_WITHIN_MS, log: options.log });
    this.direct = new NatsDirect({ natsUrl: options.natsUrl, name: 'sluice' });
    this.publisher = new JetStreamPublisher(this.direct, timeout);
  }

  /**
   * Creates the streams, or checks the ones there are: settings that can change in place
   * (discard policy, size, replicas, subjects) are corrected with a warning; a stream with
   * another retention or storage cannot be, and start() fails saying what to do.
   * Idempotent: every process may call it. Then opens the publish connection: a process that
   * cannot reach NATS on it fails at start-up, not on its first request.
   */
  async start(): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    const replicas = this.options.replicas ?? 1;
    for (const table of this.options.tables) {
      const streams = this.streamsOf(table);
      let created = false;
      for (const { stream, subject } of streams) {
        created = (await ensureWorkQueueStream(jsm, stream, workQueueSettings(subject, replicas, this.options.maxStreamBytes), this.options.log)) || created;
      }
      // Streams created together often get their leaders on one node: spread them, or the
      // table's writes would still go through one node. Best effort: it never stops a start.
      if (created && streams.length > 1 && replicas > 1) {
        await spreadLeaders(this.nc, jsm, streams.map(({ stream }) => stream), this.options.log).catch((err: Error) => {
          this.options.log?.warn({ table, err: err.message }, 'could not spread the leaders of the partition streams');
        });
      }
    }
    await this.direct.open();
  }

  statuses(): Record<string, ComponentStatus> {
    return { bus: this.status(), ...this.consumer?.statuses() };
  }

  async figures(): Promise<BusFigures> {
    const { withdrawalsPending: pending, withdrawn, notWithdrawn } = this.stall.figures;
    return { fullRefusals: Object.fromEntries(this.fullRefusals), timedOut: { pending, withdrawn, notWithdrawn }, consumer: await this.consumerFigures() };
  }

  /** The partition streams of a table (a table the bus was not given has the one stream). */
  private streamsOf(table: string): ReadonlyArray<{ stream: string; subject: string }> {
    return this.partitionStreams.get(table) ?? [streamOf(this.prefix, table)];
  }

  /** Not ok while a stream refused a publish as full in the last few seconds, publishes are stalled, or NATS is away. */
  status(): ComponentStatus {
    const recent = [...this.fullAt].filter(([, at]) => Date.now() - at < FULL_REPORT_MS).map(([stream]) => stream);
    const figures = { fullRefusals: [...this.fullRefusals.values()].reduce((a, b) => a + b, 0), ...this.stall.figures };
    if (this.nc.isClosed()) return { ok: false, detail: 'the NATS connection is closed', figures };
    const unreachable = this.direct.unreachable;
    if (unreachable) {
      // Tried again now, not only when a request comes: a balancer that waits for readiness
      // before it sends one would otherwise wait for ever.
      this.direct.probe();
      return { ok: false, detail: `no NATS server answers since ${new Date(unreachable.at).toISOString()} (${unreachable.reason}): publishes are refused with 503`, figures };
    }
    if (this.stall.stalled) {
      return { ok: false, detail: `stalled for ${this.stall.stalledSeconds} s: a publish got no PubAck in time; publishes are refused with 503 until NATS answers`, figures };
    }
    if (recent.length > 0) return { ok: false, detail: `stream full (max_bytes reached) for ${recent.join(', ')}: publishes are refused with 503`, figures };
    return { ok: true, figures };
  }

  /**
   * Sends the messages being filled, lets the publishes in flight have their PubAcks (each
   * within the publish timeout), stops consuming after the batch in flight, and closes the
   * publish connection.
   */
  async shutdown(): Promise<void> {
    this.flush();
    this.stall.shutdown();
    await Promise.allSettled([...this.inFlight]);
    await this.consumer?.shutdown();
    await this.direct.close();
  }

  /** Figures of this process's storage consumer (undefined if it does not consume). */
  private async consumerFigures(): Promise<BusFigures['consumer']> {
    const consumer = this.consumer;
    if (!consumer) return undefined;
    return { totals: { ...consumer.stats }, lag: await consumer.lags() };
  }

  /** Starts this process's storage consumer on every table stream (`sluice consume`). */
  consume(sink: ChunkSink): void {
    const { natsUrl, tables, partitions } = this.options;
    this.consumer = new JetStreamStorageConsumer(this.nc, { ...this.options.consumer, natsUrl, connection: this.direct, prefix: this.prefix, tables, partitions }, sink);
    this.consumer.start();
  }

  /** Counts refused requests and logs the first refusal of each episode: a full stream refuses many publishes a second. */
  private noteFull(table: string, streams: readonly string[], requests: number): void {
    const now = Date.now();
    for (const stream of streams) {
      const since = this.fullAt.get(stream);
      if (since === undefined || now - since >= FULL_REPORT_MS) {
        this.options.log?.warn({ table, stream }, 'a JetStream stream is full: publishes are refused with 503 until consumers catch up');
      }
      this.fullAt.set(stream, now);
    }
    this.fullRefusals.set(table, (this.fullRefusals.get(table) ?? 0) + requests);
  }

  /** Whether a partition stream refused a publish as full in the last FULL_HOLD_MS. */
  private heldFull(stream: string, now: number): boolean {
    const fullAt = this.fullAt.get(stream);
    return fullAt !== undefined && now - fullAt < FULL_HOLD_MS;
  }

  /**
   * Refused up front while publishes are stalled, and for FULL_HOLD_MS after every partition
   * stream of a table refused a publish as full.
   */
  refusal(tables: readonly string[] = this.options.tables): SluiceError | undefined {
    if (this.stall.stalled) {
      return new SluiceError('unavailable', `the bus is stalled: NATS has not answered for ${this.stall.stalledSeconds} s`, { retryAfterSeconds: this.options.retryAfterSeconds });
    }
    const now = Date.now();
    for (const table of tables) {
      if (this.streamsOf(table).every(({ stream }) => this.heldFull(stream, now))) return new SluiceError('unavailable', STREAM_FULL, { retryAfterSeconds: this.options.retryAfterSeconds });
    }
    return undefined;
  }

  async publish(chunks: readonly TableChunk[], held?: Reservation): Promise<void> {
    const limit = (this.nc.info?.max_payload ?? 1024 * 1024) - HEADER_ROOM;
    // Refuse before publishing anything: a request is stored whole or not at all.
    const oversized = chunks.find((chunk) => chunk.data.byteLength > limit);
    if (oversized) {
      throw new SluiceError('payload_too_large', `a row of ${oversized.data.byteLength} bytes exceeds the bus message limit of ${limit} bytes`);
    }
    // A server that does not answer does not read either: writing more would only pile up here.
    const stalled = this.refusal([]); // for no table: refused only while stalled
    if (stalled) throw stalled;
    if (chunks.length === 0) return;
    const target = Math.min(limit, MESSAGE_TARGET_BYTES, Math.floor(this.options.maxStreamBytes / STREAM_SHARE));
    return new Promise<void>((resolve, reject) => {
      let group: Group | undefined;
      for (const chunk of chunks) {
        const message = this.messageFor(chunk, target);
        message.chunks.push(chunk.data);
        message.parts.push(`${chunk.data.byteLength}:${chunk.rows}`);
        message.bytes += chunk.data.byteLength;
        message.rows += chunk.rows;
        group = group === undefined ? message.group : tie(group, message.group);
        if (message.bytes >= target || message.parts.length >= MAX_PARTS) this.send(message);
      }
      group!.requests.push({ resolve, reject, held });
      this.flushSoon();
    });
  }

  /** The open message of the chunk's table, or a new one if that would go past `target` bytes (or holds other columns). */
  private messageFor(chunk: TableChunk, target: number): Message {
    const open = this.open.get(chunk.table);
    if (open && open.bytes + chunk.data.byteLength <= target && sameColumns(open.columnList, chunk.columns)) return open;
    if (open) this.send(open);
    const { stream, subject } = this.nextPartition(chunk.table);
    const message: Message = {
      table: chunk.table,
      stream,
      subject,
      columnList: chunk.columns,
      columns: chunk.columns.join(','),
      msgID: `${this.id}:${++this.sent}`,
      chunks: [],
      parts: [],
      bytes: 0,
      rows: 0,
      group: { messages: [], requests: [], unsettled: 1 },
    };
    message.group.messages.push(message);
    this.open.set(chunk.table, message);
    return message;
  }

  /** The table's next partition stream in turn, passing over those held full while another is not. */
  private nextPartition(table: string): { stream: string; subject: string } {
    const streams = this.streamsOf(table);
    if (streams.length === 1) return streams[0]!;
    const first = this.turn.get(table) ?? 0;
    const now = Date.now();
    let partition = first % streams.length;
    for (let i = 0; i < streams.length; i++) {
      const candidate = (first + i) % streams.length;
      if (!this.heldFull(streams[candidate]!.stream, now)) {
        partition = candidate;
        break;
      }
    }
    this.turn.set(table, partition + 1);
    return streams[partition]!;
  }

  /** The open messages go out when this turn of the event loop ends: every request of the turn is in them by then. */
  private flushSoon(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    for (const message of this.open.values()) this.send(message);
  }

  private send(message: Message): void {
    this.open.delete(message.table);
    const headers: Array<[string, string]> = [
      [PubHeaders.MsgIdHdr, message.msgID],
      ['Sluice-Columns', message.columns],
      ['Sluice-Rows', String(message.rows)],
    ];
    if (message.parts.length > 1) headers.push([PARTS_HEADER, message.parts.join(',')]);
    // The requests' rows are written as they are: they stay untouched until the PubAck (a
    // request's buffers go back to the workers only once the bus acknowledged it).
    const publishing = this.publisher.publish(message.subject, message.chunks, headers).then(
      (ack) => this.answered(message, ack, undefined),
      (err: unknown) => this.answered(message, undefined, err ?? new Error('publish failed')), // never undefined: that reads as success
    );
    message.chunks = [];
    this.inFlight.add(publishing);
    void publishing.finally(() => this.inFlight.delete(publishing));
  }

  private answered(message: Message, ack: PubAck | undefined, err: unknown): void {
    message.ack = ack;
    message.err = err;
    const group = message.group;
    if (--group.unsettled === 0) void this.finish(group);
  }

  /** Every message of the group has its answer: acknowledge its requests, or refuse them all and withdraw what was stored. */
  private async finish({ messages, requests }: Group): Promise<void> {
    const failed = messages.filter((message) => message.err !== undefined);
    if (failed.length === 0) {
      for (const request of requests) request.resolve();
      return;
    }
    const unanswered = failed.find((message) => outcomeUnknown(message.err));
    if (unanswered) {
      // Sent but unanswered: the bytes may still be queued here and the rows may still arrive.
      // Keep the bytes reserved until NATS answers, then withdraw every message that may be stored.
      const kept = requests.flatMap(({ held }) => (held ? [held.split(held.bytes)] : []));
      this.stall.timedOut(messages.filter((message) => message.err === undefined || outcomeUnknown(message.err)), kept);
      const err = unanswered.err as Error;
      const refusal = new SluiceError('unavailable', `the bus did not acknowledge the rows in time: ${err.message}`, { cause: err, retryAfterSeconds: this.options.retryAfterSeconds });
      for (const request of requests) request.reject(refusal);
      return;
    }
    await this.withdraw(messages.filter((message) => message.ack !== undefined));
    const full = failed.filter((message) => isStreamFull(message.err));
    for (const table of new Set(full.map((message) => message.table))) {
      this.noteFull(table, full.filter((message) => message.table === table).map((message) => message.stream), requests.length);
    }
    const err = failed[0]!.err as Error;
    const reason = full.length > 0 ? STREAM_FULL : `the bus did not acknowledge the rows: ${err.message}`;
    const refusal = new SluiceError('unavailable', reason, { cause: err, retryAfterSeconds: this.options.retryAfterSeconds });
    for (const request of requests) request.reject(refusal);
  }

  /**
   * Deletes the messages of a group JetStream took only in part, so a 503 means "nothing
   * stored" and the client's retry is not a duplicate. They are the newest messages of their
   * streams, far behind a consumer that let the stream fill up.
   */
  private async withdraw(stored: Message[]): Promise<void> {
    for (const message of stored) {
      const { stream, seq } = message.ack!;
      try {
        this.jsm ??= await jetstreamManager(this.nc, { checkAPI: false });
        if (!(await deleteIfOurs(this.jsm, stream, seq, message.msgID))) {
          this.options.log?.error({ stream, seq, msgID: message.msgID }, 'could not withdraw part of a refused request: the PubAck named another message (not deleted); those rows may be stored');
        }
      } catch (err) {
        // No stream took the delete (no leader yet, or a node that has not loaded it since it restarted), or no answer came: by its msgID, later.
        if (noStreamYet(err) || streamNotFound(err) || outcomeUnknown(err)) this.stall.withdrawLater([message]);
        else this.options.log?.error({ stream, seq, err: (err as Error).message }, 'could not withdraw part of a refused request: those rows may be stored');
      }
    }
  }
}

/** Ties two groups into one (the smaller moves into the larger). */
function tie(a: Group, b: Group): Group {
  if (a === b) return a;
  const [into, from] = a.messages.length >= b.messages.length ? [a, b] : [b, a];
  for (const message of from.messages) {
    message.group = into;
    into.messages.push(message);
  }
  for (const request of from.requests) into.requests.push(request);
  into.unsettled += from.unsettled;
  return into;
}
