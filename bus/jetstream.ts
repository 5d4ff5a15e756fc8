/**
 * JetStreamBus: the cluster bus. Rows travel as JetStream messages, one stream per table
 * (WorkQueue retention: a message leaves the stream once a storage consumer acked it).
 * publish() resolves only when JetStream acknowledged every message of the request — that is
 * what a gateway's 2xx promises in cluster mode. Each message carries a msgID, so a publish
 * retried after a lost PubAck is stored once (the stream's duplicate window).
 */
import { randomUUID } from 'node:crypto';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient } from '@nats-io/jetstream';
import { SluiceError } from '../core/errors.ts';
import type { Bus, ChunkSink, TableChunk } from './bus.ts';
import { JetStreamStorageConsumer, type ConsumerTuning } from './jetstream-consumer.ts';
import { streamOf } from './jetstream-names.ts';

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
}

/** Header room we keep under the server's max_payload. */
const HEADER_ROOM = 4096;

export class JetStreamBus implements Bus {
  private readonly js: JetStreamClient;
  private readonly prefix: string;
  private consumer: JetStreamStorageConsumer | undefined;

  constructor(private readonly nc: NatsConnection, private readonly options: JetStreamBusOptions) {
    this.js = jetstream(nc, { timeout: options.publishTimeoutMs ?? 5000 });
    this.prefix = options.prefix ?? 'SLUICE';
  }

  /** Creates or updates the streams (idempotent: every process may call it). */
  async start(): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    for (const table of this.options.tables) {
      const { stream, subject } = streamOf(this.prefix, table);
      const config = {
        name: stream,
        subjects: [subject],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        num_replicas: this.options.replicas ?? 1,
        max_bytes: this.options.maxStreamBytes,
        duplicate_window: 120_000_000_000, // 2 min in ns
      };
      try {
        await jsm.streams.info(stream);
        await jsm.streams.update(stream, config);
      } catch {
        await jsm.streams.add(config);
      }
    }
  }

  /** Stops consuming after the batch in flight. */
  async shutdown(): Promise<void> {
    await this.consumer?.shutdown();
  }

  /** Figures of this process's storage consumer, for /metrics (undefined if it does not consume). */
  async consumerFigures(): Promise<{ totals: Record<string, number>; lag: Record<string, number> } | undefined> {
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

  async publish(chunks: readonly TableChunk[]): Promise<void> {
    const limit = this.nc.info ? this.nc.info.max_payload - HEADER_ROOM : 1024 * 1024 - HEADER_ROOM;
    // Refuse before publishing anything: a request is stored whole or not at all.
    const oversized = chunks.find((chunk) => chunk.data.byteLength > limit);
    if (oversized) {
      throw new SluiceError('payload_too_large', `a row of ${oversized.data.byteLength} bytes exceeds the bus message limit of ${limit} bytes`);
    }
    const request = randomUUID();
    const acks = chunks.map((chunk, index) => {
      const h = headers();
      h.set('Sluice-Columns', chunk.columns.join(','));
      h.set('Sluice-Rows', String(chunk.rows));
      return this.js.publish(streamOf(this.prefix, chunk.table).subject, chunk.data, { msgID: `${request}:${index}`, headers: h });
    });
    try {
      await Promise.all(acks);
    } catch (err) {
      throw new SluiceError('unavailable', `the bus did not acknowledge the rows: ${(err as Error).message}`, {
        cause: err,
        retryAfterSeconds: this.options.retryAfterSeconds,
      });
    }
  }
}
