/**
 * JetStreamStorageConsumer: moves rows from the table streams into storage. Any number of
 * processes share one durable pull consumer per stream. Batches aim at large inserts
 * (≥ batchRows rows or batchMaxWaitMs of data); messages are acked only after their insert.
 *
 * Exactly once, with a write-ahead batch manifest in a KV bucket and ClickHouse insert
 * deduplication:
 *   1. fresh messages form a batch; its manifest {token, seqs, ids, pending} is written first
 *      (ids: the messages' msgIDs, so a new message given an old sequence is not taken for it);
 *   2. the batch is inserted with insert_deduplication_token = token;
 *   3. the manifest is marked committed, then the messages are acked. Committed manifests stay
 *      in the bucket for an hour (its TTL).
 * A consumer dying (or freezing) anywhere leaves its messages unacked; JetStream redelivers
 * them after ackWait. A nats-server killed with SIGKILL may also forget acks it had not
 * written yet, and deliver stored messages again as new. So every message is first looked up
 * in the manifests (an in-memory index fed by a KV watch, batch-manifests.ts):
 *   - none: the consumer died before step 1, nothing was inserted → a fresh batch;
 *   - committed: the rows are stored → ack (committed is final: the index's word is enough);
 *   - pending: the insert may or may not have happened → claim the manifest (compare-and-set),
 *     rebuild exactly that batch from the stream by sequence, insert it again with the SAME
 *     token (ClickHouse drops it if the first insert had landed), commit, ack.
 * Failures, by class (storage/errors.ts):
 *   - storage unavailable: the batch is retried with backoff, never dead-lettered;
 *   - rows refused (a data error): the same bytes can never be stored, so the batch is split
 *     until the offending messages stand alone (bus/isolate.ts); they go to the dead-letter
 *     stream at once with the reason, and the rest of the batch is stored. A message may hold
 *     the rows of several requests (gateways fill messages up to ~1 MiB, Sluice-Parts lists
 *     them): a refused one is stored request by request, and only the refused requests' rows are parked;
 *   - anything else (a bug): retried, and split and dead-lettered the same way once a message
 *     was delivered maxAttempts times.
 * The consumer moves bytes: messages are pulled on a connection of its own (nats-direct.ts: each
 * payload copied once from the socket, into memory handed back once its batch is stored), and a
 * message's payload goes to the sink as it came, a batch's messages as the chunks of one
 * insert; nothing is decoded per row. The sink must be done with a batch's chunks when it
 * resolves (bus/storage-sink.ts: the insert's body written and answered).
 * Each table's loop runs under a Supervisor: a loop that fails (NATS away at start, a bug) is
 * restarted with backoff, counted, and shown in readiness.
 */
import { randomUUID } from 'node:crypto';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, PubHeaders, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { pino } from 'pino';
import { SluiceError } from '../core/errors.ts';
import { consumerNotFound, revisionConflict } from '../core/jetstream-errors.ts';
import type { Logger } from '../core/log.ts';
import type { ConsumerTotals } from '../core/metrics.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { sleep, Supervisor, type LoopContext } from '../core/supervisor.ts';
import { isDataError } from '../storage/errors.ts';
import type { ChunkSink, ConsumerLag, TableChunk } from './bus.ts';
import { ManifestIndex, memberOf, type Manifest } from './batch-manifests.ts';
import { storeIsolating } from './isolate.ts';
import { deadLetterOf, DURABLE, manifestBucketOf, partitionOf, PARTS_HEADER, streamOf } from './jetstream-names.ts';
import { ensureDurableConsumer } from './jetstream-streams.ts';
import { NatsDirect, type PulledMessage } from './nats-direct.ts';

/** Where the consumer pulls from: the NATS servers (NATS_URL, for its own pull connection) and the tables' streams. */
export interface ConsumerPlacement {
  natsUrl: string;
  /** A connection to pull on that someone else opened and closes (the bus's); else the consumer opens its own from natsUrl. */
  connection?: NatsDirect;
  prefix: string;
  tables: readonly string[];
  /** Partition streams per table this process pulls from at least (default 1); any other partition stream there is, it finds and pulls from too. */
  partitions?: ReadonlyMap<string, number>;
}

/** One partition stream of a table, as the consumer pulls from it. */
interface Partition {
  table: string;
  partition: number;
  stream: string;
}

/** How long manifests are kept: a message stored longer ago than this is no longer recognised. */
const MANIFEST_TTL_MS = 60 * 60 * 1000;

export interface ConsumerTuning {
  /** Rows that make a batch big enough to insert. Default 10,000. */
  batchRows?: number;
  /** Longest a batch waits to fill, in ms. Default 1000. */
  batchMaxWaitMs?: number;
  /** Messages one pull may bring. Default 16 (at most 16 MiB of rows: gateways fill messages up to 1 MiB). */
  fetchMessages?: number;
  /**
   * How often the streams are listed to find partitions no loop pulls from yet, or that are
   * gone, and an idle loop checks its stream did not go back below its consumer, in ms. Default 10,000.
   */
  discoverEveryMs?: number;
  /** How long a delivered message may stay unacked before it is redelivered, in ms. Default 30,000. */
  ackWaitMs?: number;
  /** Deliveries before a message failing for a non-storage reason is dead-lettered. Default 5. */
  maxAttempts?: number;
  /** Longest pause between retries while storage is down, in ms (while JetStream is, at most 5,000). Default 30,000. */
  maxBackoffMs?: number;
  /** Replicas of the manifest bucket and dead-letter stream. Default 1. */
  replicas?: number;
  log?: Logger;
  /** Called when a table's loop failed and is restarted (the composition root counts it). */
  onRestart?: (loop: string) => void;
}

export class JetStreamStorageConsumer {
  /** Figures for /metrics. */
  readonly stats: Required<ConsumerTotals> = { batches: 0, rows: 0, redelivered: 0, deadLettered: 0, failures: 0 };
  private readonly js: JetStreamClient;
  private readonly puller: NatsDirect;
  private readonly supervisor: Supervisor;
  /** Each running partition loop's manifest index (for its status), by loop name. */
  private readonly manifests = new Map<string, ManifestIndex>();
  /** The partitions this process pulls from, by loop name. */
  private readonly pulled = new Map<string, Partition>();
  private readonly tuning: Required<Omit<ConsumerTuning, 'log' | 'onRestart'>>;
  /** For the rare ack that must look at the stream first. */
  private jsm: JetStreamManager | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: ConsumerTuning & ConsumerPlacement,
    private readonly sink: ChunkSink,
  ) {
    this.js = jetstream(nc);
    this.puller = options.connection ?? new NatsDirect({ natsUrl: options.natsUrl, name: 'sluice-consume' });
    this.tuning = {
      batchRows: options.batchRows ?? 10_000,
      batchMaxWaitMs: options.batchMaxWaitMs ?? 1000,
      fetchMessages: options.fetchMessages ?? 16,
      discoverEveryMs: options.discoverEveryMs ?? 10_000,
      ackWaitMs: options.ackWaitMs ?? 30_000,
      maxAttempts: options.maxAttempts ?? 5,
      maxBackoffMs: options.maxBackoffMs ?? 30_000,
      replicas: options.replicas ?? 1,
    };
    const log = options.log ?? silentLogger;
    this.supervisor = new Supervisor({ log, onRestart: options.onRestart, maxBackoffMs: this.tuning.maxBackoffMs });
  }

  /** Pulls from the configured partitions of every table, and from any other partition stream found there (now and every discoverEveryMs). */
  start(): void {
    for (const table of this.options.tables) {
      for (let partition = 0; partition < (this.options.partitions?.get(table) ?? 1); partition++) this.pull(table, partition);
    }
    this.supervisor.run('consumer.discovery', (context) => this.discover(context));
  }

  private pull(table: string, partition: number): void {
    const name = loopName(table, partition);
    if (this.pulled.has(name)) return;
    const placed: Partition = { table, partition, stream: streamOf(this.options.prefix, table, partition).stream };
    this.pulled.set(name, placed);
    this.supervisor.run(name, (context) => this.run(placed, name, context));
  }

  /**
   * Follows the partition count the gateways publish with, which may differ from this
   * process's (a rolling change): a partition stream with no loop here gets one; the loop of a
   * partition past the first whose stream was deleted (a surplus one, drained and removed) ends.
   * Partition 0 keeps its loop: its stream gone is a fault, shown in readiness.
   */
  private async discover({ signal }: LoopContext): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    while (!signal.aborted) {
      await sleep(this.tuning.discoverEveryMs, signal);
      if (signal.aborted) break;
      const names = new Set<string>();
      for await (const name of jsm.streams.names()) names.add(name);
      for (const name of names) {
        for (const table of this.options.tables) {
          const partition = partitionOf(this.options.prefix, table, name);
          if (partition !== undefined) this.pull(table, partition);
        }
      }
      for (const [loop, { partition, stream }] of this.pulled) {
        if (names.has(stream) || partition === 0) continue;
        this.options.log?.info({ stream }, 'a partition stream is gone: its consumer loop ends');
        this.pulled.delete(loop);
        await this.supervisor.end(loop);
      }
    }
  }

  /** Stores the batch in flight, then stops; a pull waiting for more messages ends at once (a stop does not wait out batchMaxWaitMs). */
  async shutdown(): Promise<void> {
    await this.supervisor.stop();
    if (!this.options.connection) await this.puller.close();
  }

  /** Each partition's loop, by readiness name (`consumer.<table>`, `consumer.<table>.p<N>` for partitions past the first). */
  statuses(): Record<string, ComponentStatus> {
    return Object.fromEntries([...this.pulled.keys()].map((loop) => [loop, this.status(loop)]));
  }

  /** A partition's loop, and the watch of the batch manifests it checks every message against. */
  private status(name: string): ComponentStatus {
    const loop = this.supervisor.status(name);
    const manifests = this.manifests.get(name)?.status();
    if (!manifests) return loop;
    const figures = { ...loop.figures, manifestBadValues: manifests.figures?.badValues ?? 0 };
    if (loop.ok && !manifests.ok) return { ok: false, detail: `batch manifests: ${manifests.detail}`, figures };
    return { ...loop, ...(loop.ok && manifests.detail ? { detail: `batch manifests: ${manifests.detail}` } : {}), figures };
  }

  /**
   * What waits in a partition stream for this consumer group (consumer lag): messages, and bytes
   * (a work-queue stream keeps only what is not yet acknowledged, so its bytes are the lag's),
   * beside the stream's limit (past it, publishes are refused).
   */
  async lag(table: string, partition = 0): Promise<ConsumerLag> {
    const jsm = await jetstreamManager(this.nc);
    const { stream } = streamOf(this.options.prefix, table, partition);
    const [consumer, info] = await Promise.all([jsm.consumers.info(stream, DURABLE), jsm.streams.info(stream)]);
    return { table, partition, messages: consumer.num_pending + consumer.num_ack_pending, bytes: info.state.bytes, limitBytes: info.config.max_bytes };
  }

  /** The lag of every partition this process pulls from (one whose figures cannot be read is left out). */
  async lags(): Promise<ConsumerLag[]> {
    const lags = await Promise.all([...this.pulled.values()].map(({ table, partition }) => this.lag(table, partition).catch(() => undefined)));
    return lags.filter((lag) => lag !== undefined);
  }

  private async run({ table, stream }: Partition, name: string, { signal, report }: LoopContext): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    await this.ensureDurable(jsm, stream);
    await this.ensureDeadLetter(jsm);
    const manifests = await new Kvm(this.nc).create(manifestBucketOf(this.options.prefix), {
      history: 1,
      replicas: this.tuning.replicas,
      ttl: MANIFEST_TTL_MS,
      // Reads from the stream's leader: a direct get may be answered by a replica that is behind
      // (one just restarted), and a manifest read as missing would have its batch inserted again
      // under a new token, a duplicate. The index follows the bucket by a watch, which is ordered.
      allow_direct: false,
    });
    const index = new ManifestIndex(manifests, MANIFEST_TTL_MS, { name: `batch manifests of ${stream}`, stream, log: this.options.log });
    this.manifests.set(name, index);
    try {
      await index.start();
      let backoffMs = 0;
      let behind = false; // the stream ended before its consumer's position at the last check
      let checkedAt = Date.now();
      while (!signal.aborted) {
        let messages: PulledMessage[];
        try {
          messages = await this.fetchBatch(stream, signal);
        } catch (err) {
          // NATS unreachable or restarting: the client reconnects by itself; pull again later.
          report({ ok: false, detail: `cannot pull from JetStream: ${(err as Error).message}` });
          this.options.log?.warn({ table, err: (err as Error).message }, 'fetch from JetStream failed; retrying');
          await sleep(500, signal);
          continue;
        }
        if (messages.length === 0) {
          report({ ok: true });
          if (Date.now() - checkedAt >= this.tuning.discoverEveryMs) {
            checkedAt = Date.now();
            behind = await this.restartIfBehind(jsm, stream, behind).catch((err: Error) => {
              this.options.log?.warn({ stream, err: err.message }, 'could not check or re-create the consumer of a stream that went back; trying again at the next check');
              return behind;
            });
          }
          continue;
        }
        try {
          await this.process(jsm, stream, table, messages, index);
          // Stored (or parked) and acked, the insert's writes done: their memory serves the next pulls.
          for (const message of messages) message.release();
          backoffMs = 0;
          report({ ok: true });
        } catch (err) {
          this.stats.failures++;
          const ceiling = err instanceof NatsOutage ? Math.min(NATS_RETRY_MAX_MS, this.tuning.maxBackoffMs) : this.tuning.maxBackoffMs;
          backoffMs = Math.min(ceiling, Math.max(250, backoffMs * 2));
          report({ ok: false, detail: `batch not stored, retrying in ${backoffMs} ms: ${(err as Error).message}` });
          await this.handleFailure(table, messages, err, backoffMs, signal);
        }
      }
    } finally {
      this.manifests.delete(name);
      index.stop();
    }
  }

  private ensureDurable(jsm: JetStreamManager, stream: string): Promise<void> {
    return ensureDurableConsumer(jsm, stream, { name: DURABLE, ackWaitMs: this.tuning.ackWaitMs, maxAckPending: 100_000 });
  }

  /**
   * nats-server 2.9 can bring a WorkQueue stream back at an earlier sequence after a SIGKILL
   * (nats-io/nats-server#6600). Its durable consumer, still at its old position, then delivers
   * nothing until new messages pass that position, while they pile up below it. Checked while
   * the loop is idle; seen at two checks in a row (not a leader that has not applied the
   * stream's end yet), the consumer is re-created from the stream's start: what it had delivered
   * comes again and is matched against the batch manifests. Returns whether the stream is behind
   * now (and was not yet seen so before).
   */
  private async restartIfBehind(jsm: JetStreamManager, stream: string, seenBefore: boolean): Promise<boolean> {
    const [consumer, info] = await Promise.all([jsm.consumers.info(stream, DURABLE), jsm.streams.info(stream)]);
    // Messages wait that the consumer neither offers nor awaits acks for: they lie at or below its position.
    const behind = info.state.messages > 0 && consumer.num_pending === 0 && consumer.num_ack_pending === 0 && info.state.first_seq <= consumer.delivered.stream_seq;
    if (!behind || !seenBefore) return behind;
    this.options.log?.error(
      { stream, consumerAt: consumer.delivered.stream_seq, streamEndsAt: info.state.last_seq, waiting: info.state.messages },
      'the stream went back below its consumer (nats-server lost its last sequence): re-creating the consumer so the messages waiting are delivered',
    );
    await jsm.consumers.delete(stream, DURABLE).catch((err: unknown) => {
      // Another process may have done it; anything else (no answer) is tried again at the next check.
      if (!consumerNotFound(err)) throw err;
    });
    await this.ensureDurable(jsm, stream);
    return false;
  }

  /** The dead-letter stream must exist before anything can be parked there: a failure stops the loop (to be restarted). */
  private async ensureDeadLetter(jsm: JetStreamManager): Promise<void> {
    const { stream, subject } = deadLetterOf(this.options.prefix);
    if (await jsm.streams.info(stream).catch(() => undefined)) return;
    await jsm.streams
      .add({ name: stream, subjects: [subject('*')], retention: RetentionPolicy.Limits, storage: StorageType.File, num_replicas: this.tuning.replicas })
      .catch(async (err) => {
        // Another process created it between our two calls.
        if (!(await jsm.streams.info(stream).catch(() => undefined))) throw err;
      });
  }

  /**
   * Pulls messages until the batch holds batchRows rows or batchMaxWaitMs passed. A message
   * delivered twice while the batch fills (a restarted nats-server forgets deliveries it had
   * not yet written) is kept once: its latest delivery, whose ack counts.
   */
  private async fetchBatch(stream: string, signal: AbortSignal): Promise<PulledMessage[]> {
    const batch = new Map<number, PulledMessage>();
    let rows = 0;
    const deadline = Date.now() + this.tuning.batchMaxWaitMs;
    while (rows < this.tuning.batchRows && !signal.aborted) {
      const wait = deadline - Date.now();
      if (wait < 50) break;
      // By message count: nats-server 2.9 leaves byte-bounded pulls unanswered under a backlog
      // ("heartbeats missed"). Messages are < 1 MiB (max_payload), so this also bounds the bytes.
      try {
        const fetched = await this.puller.fetch(stream, DURABLE, this.tuning.fetchMessages, Math.max(1000, wait), signal);
        for (const message of fetched) {
          if (!batch.has(message.seq)) rows += rowsOf(message.headers);
          batch.set(message.seq, message);
        }
      } catch (err) {
        // A pull may end in an error (the connection failed). Messages already delivered stay
        // ours: store them now rather than leave them unacked until ackWait brings them back.
        if (batch.size === 0) throw err;
        this.options.log?.warn({ err: (err as Error).message, messages: batch.size }, 'pull from JetStream ended early; storing the batch so far');
        break;
      }
    }
    return [...batch.values()];
  }

  private async process(jsm: JetStreamManager, stream: string, table: string, messages: PulledMessage[], index: ManifestIndex): Promise<void> {
    const fresh: PulledMessage[] = [];
    const byManifest = new Map<string, { manifest: Manifest; held: PulledMessage[] }>();
    // A message the stream holds twice, under two sequences: stored once, both acked.
    const freshIds = new Set<string>();
    const twins: PulledMessage[] = [];
    let moved = 0;
    for (const message of messages) {
      if (message.deliveryCount > 1) this.stats.redelivered++;
      const msgID = msgIdOf(message.headers);
      const owner = index.find(stream, message.seq, msgID);
      if (!owner) {
        if (msgID === '' || !freshIds.has(msgID)) fresh.push(message);
        else twins.push(message);
        freshIds.add(msgID);
      } else {
        const known = byManifest.get(owner.key);
        if (known) known.held.push(message);
        else byManifest.set(owner.key, { manifest: owner.manifest, held: [message] });
        if (owner.manifest.ids && msgID !== '' && owner.manifest.seqs[owner.manifest.ids.indexOf(msgID)] !== message.seq) moved++;
      }
    }
    // Replicas that diverged (all nodes killed at once, nats-server 2.9) can bring a message back under another sequence.
    if (moved + twins.length > 0) this.options.log?.warn({ table, stream, messages: moved, twins: twins.length }, 'messages of batches stored or started before came back under other sequences, or came twice: recognised by their msgIDs');
    for (const [key, { manifest, held }] of byManifest) await this.finishManifest(jsm, stream, table, index, key, manifest, held);
    if (fresh.length > 0) await this.storeFresh(stream, table, index, fresh);
    if (twins.length > 0) await this.ack(twins, 'ack second copies of stored messages');
  }

  /**
   * Stores fresh messages as one batch or, when storage refuses rows, as smaller ones until the
   * refused messages stand alone: those are dead-lettered, the rest stored. A failure that is
   * not the rows' fault is thrown, so the caller retries the batch (messages already stored
   * and acked are not redelivered).
   */
  private async storeFresh(stream: string, table: string, index: ManifestIndex, messages: PulledMessage[]): Promise<void> {
    const exhausted = messages.some((message) => message.deliveryCount >= this.tuning.maxAttempts);
    const refused = (err: unknown) => isDataError(err) || (exhausted && !isRetryable(err));
    const outcomes = await storeIsolating(
      messages,
      (group) => this.insertFresh(stream, table, index, [...group]),
      refused,
      (err, count) => this.options.log?.warn({ table, messages: count, reason: (err as Error).message }, 'a batch was refused as a whole: splitting it to find the messages that fail'),
    );
    let retry: unknown;
    for (const [i, err] of outcomes.entries()) {
      if (err === undefined) continue;
      if (refused(err)) await this.storeRequestsApart(stream, table, messages[i]!, err, refused);
      else retry ??= err;
    }
    if (retry !== undefined) throw retry;
  }

  /**
   * A message storage refused. When it holds several requests' rows (PARTS_HEADER), each
   * request's rows are stored on their own, split as a batch is, and only the refused ones are
   * parked: one client's bad rows never park another's. Each insert's token is the message's
   * sequence, msgID and part range, so after a redelivery the same parts are dropped as duplicates.
   */
  private async storeRequestsApart(stream: string, table: string, message: PulledMessage, err: unknown, refused: (err: unknown) => boolean): Promise<void> {
    const parts = partsOf(table, message);
    if (parts.length <= 1) return this.deadLetter(table, message, err);
    const outcomes = await storeIsolating(parts, (group) => this.sink(group.map((part) => part.chunk), `${stream}:${message.seq}:${msgIdOf(message.headers)}:parts:${group[0]!.index}-${group.at(-1)!.index}`), refused);
    const outage = outcomes.find((outcome) => outcome !== undefined && !refused(outcome));
    if (outage !== undefined) throw outage; // retried: the parts stored so far are deduplicated then
    for (const [i, partErr] of outcomes.entries()) if (partErr !== undefined) await this.park(table, message, partErr, parts[i]!);
    await this.ack([message], 'ack a message stored in parts');
    this.stats.batches++;
    this.stats.rows += parts.reduce((sum, part, i) => sum + (outcomes[i] === undefined ? part.chunk.rows : 0), 0);
  }

  private async insertFresh(stream: string, table: string, index: ManifestIndex, messages: PulledMessage[]): Promise<void> {
    const sorted = [...messages].sort((a, b) => a.seq - b.seq);
    const seqs = sorted.map((m) => m.seq);
    const batch = randomUUID();
    // Its own key, not one per first sequence: a batch that got the same first sequence in another
    // history of the stream (replicas that diverged) must not replace this one's manifest.
    const key = `${stream}.${seqs[0]}-${batch.slice(0, 8)}`;
    const manifest: Manifest = { token: `${stream}:${seqs[0]}-${seqs[seqs.length - 1]}:${batch}`, seqs, ids: sorted.map((m) => msgIdOf(m.headers)), state: 'pending' };
    // Known here before the put: a put that timed out may still land, so the batch's messages,
    // back after the retry's backoff, must finish this batch under its token, never start another.
    index.apply(key, manifest);
    await viaNats('write the batch manifest', () => index.kv.put(key, JSON.stringify(manifest)));
    try {
      await this.sink(messages.map((m) => toChunk(table, m.data, m.headers)), manifest.token);
    } catch (err) {
      // Refused rows stored nothing: forget the batch, so its messages count as fresh again
      // (smaller batches, or the dead-letter stream). An outage keeps the manifest: the insert
      // may have landed, and a retry with the same token must find out.
      if (!isRetryable(err)) await this.forget(index, key);
      throw err;
    }
    const committed: Manifest = { ...manifest, state: 'committed' };
    await viaNats('commit the batch manifest', () => index.kv.put(key, JSON.stringify(committed)));
    index.apply(key, committed);
    await this.ack(messages, 'ack the batch');
    this.count(messages);
  }

  private async forget(index: ManifestIndex, key: string): Promise<void> {
    await viaNats('forget the batch manifest', () => index.kv.delete(key));
    index.apply(key, undefined);
  }

  /**
   * A batch some consumer started (`known`: as this process's index has it): finish it exactly
   * as it was, or just ack if it is done. Committed is final, so a batch the index knows as
   * committed is acked without asking the bucket: after every node was killed at once the
   * bucket can come back without the entry, and the batch would look unstored and be stored twice.
   */
  private async finishManifest(jsm: JetStreamManager, stream: string, table: string, index: ManifestIndex, key: string, known: Manifest, held: PulledMessage[]): Promise<void> {
    if (known.state === 'committed') {
      await this.ack(held, 'ack messages of a stored batch');
      return;
    }
    const manifests = index.kv;
    const entry = await viaNats('read the batch manifest', () => manifests.get(key));
    const read = entry?.operation === 'PUT' ? entry.json<Manifest>() : undefined;
    if (read?.state === 'committed') {
      index.apply(key, read);
      await this.ack(held, 'ack messages of a stored batch');
      return;
    }
    // Not in the bucket (lost, as above; its put timed out and has not landed; or expired, but
    // then this index would have let it go too): finished as the index knows it, under its
    // token, so an insert that landed is not repeated; written, so another consumer finds it claimed.
    const manifest = read ?? known;
    try {
      const claimed = JSON.stringify({ ...manifest, claimedBy: randomUUID() });
      await (read ? manifests.update(key, claimed, entry!.revision) : manifests.create(key, claimed));
    } catch (err) {
      if (!revisionConflict(err)) throw new NatsOutage(`cannot claim the batch manifest: ${(err as Error).message}`, err);
      // Another consumer claimed it first; it will commit, and then these are acked.
      this.options.log?.info({ table, key, err: (err as Error).message }, 'a batch manifest changed since it was read (claimed by another consumer?): its messages come back in a second');
      for (const message of held) message.nak(1000);
      return;
    }
    // The batch's members, by msgID (a message may be back under another sequence) or, without one, by sequence.
    const heldAs = new Map(held.map((m) => [memberOf(manifest, m.seq, msgIdOf(m.headers)), m]));
    const chunks: TableChunk[] = [];
    const included: number[] = [];
    for (const [i, seq] of manifest.seqs.entries()) {
      const member = memberOf(manifest, seq, manifest.ids?.[i] ?? '');
      const message = heldAs.get(member);
      if (message) {
        chunks.push(toChunk(table, message.data, message.headers));
        included.push(i);
        continue;
      }
      const stored = await viaNats(`read message ${seq} of ${stream}`, () => jsm.streams.getMessage(stream, { seq }));
      if (!stored) await this.throwIfNotYetThere(jsm, stream, seq);
      else if (memberOf(manifest, seq, msgIdOf(stored.header)) === member) {
        chunks.push(toChunk(table, stored.data, stored.header));
        included.push(i);
      }
      // Else another message has its sequence: the batch's own was withdrawn, or is under another sequence now and not in this pull.
    }
    try {
      await this.sink(chunks, manifest.token);
    } catch (err) {
      if (!isDataError(err)) throw err;
      // The batch cannot be stored as it was: forget it; its messages come back as fresh ones
      // and are split until the refused ones are found.
      await this.forget(index, key);
      for (const message of held) message.nak(0);
      return;
    }
    // The manifest names only what this insert had: a member left out, if it comes back, is then
    // stored as fresh. Stored twice if the first insert had landed; named here, it would be acked
    // unstored if it had not.
    const leftOut = manifest.seqs.length - included.length;
    if (leftOut > 0) this.options.log?.warn({ table, key, messages: leftOut }, 'messages of a batch being finished are not under their sequences (withdrawn, or back under others): stored without them');
    const committed: Manifest = leftOut > 0 ? withOnly(manifest, included) : { ...manifest, state: 'committed' };
    await viaNats('commit the batch manifest', () => manifests.put(key, JSON.stringify(committed)));
    index.apply(key, committed);
    await this.ack(held, 'ack the batch');
    this.count(held);
  }

  /**
   * A message of a pending batch that the stream says it does not have: deleted (a gateway
   * withdrew it: its request got 503), or not there yet: a leader elected after every node
   * restarted may answer before it has applied the stream's last messages. Left out then, the
   * batch would be committed without it, and the message, delivered later, acked as stored. So a
   * sequence past the stream's end throws (an outage: the batch waits); one inside it was deleted.
   */
  private async throwIfNotYetThere(jsm: JetStreamManager, stream: string, seq: number): Promise<void> {
    const { state } = await viaNats(`read the state of ${stream}`, () => jsm.streams.info(stream));
    if (seq > state.last_seq) throw new NatsOutage(`message ${seq} of ${stream} is not there yet (the stream ends at ${state.last_seq}): its batch waits`);
  }

  /**
   * Acks stored messages. One delivered on a connection that has closed since is acked only if
   * its stream still holds it under its msgID: a nats-server restarted meanwhile may have given
   * its sequence to another message (nats-server 2.9 gives sequences twice), and an ack removes
   * whichever message has that sequence now, unstored. Left unacked, a message that is still
   * there comes back after ack wait and is found stored.
   */
  private async ack(messages: PulledMessage[], what: string): Promise<void> {
    await viaNats(what, () => Promise.all(messages.map((message) => (message.fromClosedConnection() ? this.ackIfStillThere(message) : message.ackAck()))));
  }

  private async ackIfStillThere(message: PulledMessage): Promise<void> {
    this.jsm ??= await jetstreamManager(this.nc, { checkAPI: false });
    const stored = await this.jsm.streams.getMessage(message.stream, { seq: message.seq });
    if (stored && msgIdOf(stored.header) === msgIdOf(message.headers)) await message.ackAck();
  }

  /** The batch (or what of it is not yet stored) comes back after the backoff; acked messages ignore the nak. */
  private async handleFailure(table: string, messages: PulledMessage[], err: unknown, backoffMs: number, signal: AbortSignal): Promise<void> {
    this.options.log?.warn({ table, messages: messages.length, err: (err as Error).message, storageDown: isRetryable(err), backoffMs }, 'batch not stored; will retry');
    for (const message of messages) message.nak(backoffMs);
    await sleep(backoffMs, signal);
  }

  private async deadLetter(table: string, message: PulledMessage, err: unknown): Promise<void> {
    await this.park(table, message, err);
    // Acked, not terminated: parked safely, it must leave the work queue (nats-server 2.9 keeps terminated messages there).
    await this.ack([message], 'ack a dead-lettered message');
  }

  /** Publishes a message's rows (or one request's part of them) to the dead-letter stream with the reason. */
  private async park(table: string, message: PulledMessage, err: unknown, part?: Part): Promise<void> {
    const h = headers();
    for (const [name, values] of message.headers ?? []) for (const value of values) if (name !== PARTS_HEADER) h.append(name, value);
    h.set('Sluice-Origin-Stream', message.stream);
    h.set('Sluice-Origin-Seq', String(message.seq));
    if (part) {
      h.set('Sluice-Origin-Part', String(part.index));
      h.set('Sluice-Rows', String(part.chunk.rows));
    }
    h.set('Sluice-Attempts', String(message.deliveryCount));
    h.set('Sluice-Error', String((err as Error).message).slice(0, 1000).replace(/[\r\n]/g, ' '));
    try {
      await this.js.publish(deadLetterOf(this.options.prefix).subject(table), part?.chunk.data ?? message.data, { headers: h });
    } catch (cause) {
      throw new NatsOutage(`cannot park message ${message.seq} of ${table} in the dead-letter stream: ${(cause as Error).message}`, cause);
    }
    this.stats.deadLettered++;
    this.options.log?.error({ table, seq: message.seq, part: part?.index, attempts: message.deliveryCount, err: (err as Error).message }, 'rows dead-lettered');
  }

  private count(messages: PulledMessage[]): void {
    this.stats.batches++;
    for (const message of messages) this.stats.rows += rowsOf(message.headers);
  }
}

type Headers = { get(name: string): string } | undefined;

/**
 * JetStream (or its KV) could not do what a batch needs. Retried at most NATS_RETRY_MAX_MS
 * apart, not maxBackoffMs: trying costs NATS little, and after every node restarted the buckets
 * answer again within seconds to a minute — a consumer backed off to 30 s sat idle that long
 * after they did.
 */
class NatsOutage extends SluiceError {
  constructor(message: string, cause?: unknown) {
    super('unavailable', message, { cause });
  }
}

const NATS_RETRY_MAX_MS = 5000;

/** A NATS call of the consumer: its failure is an outage (retried), never the rows' fault. */
async function viaNats<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (cause) {
    throw new NatsOutage(`cannot ${what}: ${(cause as Error).message}`, cause);
  }
}

/** An outage: retried as it is, never split or dead-lettered. */
function isRetryable(err: unknown): boolean {
  return err instanceof SluiceError && err.retryable;
}

function loopName(table: string, partition: number): string {
  return partition === 0 ? `consumer.${table}` : `consumer.${table}.p${partition}`;
}

const silentLogger = pino({ level: 'silent' });

/** Column lists by header: the messages of a table share one array (no split per message, and the sink compares them by identity). */
const columnLists = new Map<string, readonly string[]>();

/** A message's rows as a chunk: its payload as it came, no copy. */
function toChunk(table: string, data: Uint8Array, h: Headers): TableChunk {
  const header = h?.get('Sluice-Columns') ?? '';
  let columns = columnLists.get(header);
  if (!columns) {
    if (columnLists.size >= 64) columnLists.clear(); // a handful in practice: one per table, another during an upgrade
    columnLists.set(header, (columns = header.split(',')));
  }
  return { table, columns, rows: rowsOf(h), data };
}

/** A manifest committed with only some of its members (their places in `seqs`; the held messages are always among them). */
function withOnly(manifest: Manifest, places: number[]): Manifest {
  return { ...manifest, seqs: places.map((i) => manifest.seqs[i]!), ...(manifest.ids ? { ids: places.map((i) => manifest.ids![i]!) } : {}), state: 'committed' };
}

/** One request's rows in a message that holds several. */
interface Part {
  index: number;
  chunk: TableChunk;
}

/** A message's requests (one part when it has no PARTS_HEADER, or one that does not add up). */
function partsOf(table: string, message: PulledMessage): Part[] {
  const whole = toChunk(table, message.data, message.headers);
  const listed = message.headers?.get(PARTS_HEADER);
  if (!listed) return [{ index: 0, chunk: whole }];
  const parts: Part[] = [];
  let at = 0;
  for (const [index, entry] of listed.split(',').entries()) {
    const [bytes, rows] = entry.split(':').map(Number) as [number, number];
    parts.push({ index, chunk: { ...whole, rows, data: message.data.subarray(at, at + bytes) } });
    at += bytes;
  }
  return at === message.data.byteLength ? parts : [{ index: 0, chunk: whole }];
}

function rowsOf(h: Headers): number {
  return Number(h?.get('Sluice-Rows') ?? 0);
}

/** The msgID a gateway gave the message ('' if it has none). */
function msgIdOf(h: Headers): string {
  return h?.get(PubHeaders.MsgIdHdr) ?? '';
}
