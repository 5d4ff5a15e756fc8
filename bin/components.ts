/**
 * Drivers chosen from the config: each part has one interface and an embedded and a cluster
 * driver (DESIGN.md, "Two modes, one code path"). Only the composition root calls these.
 */
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createClient } from 'redis';
import type { Bus } from '../bus/bus.ts';
import { JetStreamBus } from '../bus/jetstream.ts';
import { MemoryBus } from '../bus/memory.ts';
import type { SluiceConfig } from '../core/config.ts';
import { redactNatsServers, redactUrl } from '../core/redact.ts';
import { TokenBucketLimiter, type Limiter } from '../gateway/limiter.ts';
import { RedisTokenBucketLimiter } from '../gateway/redis-limiter.ts';
import { LocalStateStore } from '../state/local.ts';
import { NatsKvStateStore } from '../state/nats-kv.ts';
import type { StateStore } from '../state/store.ts';
import type { Logger } from '../core/log.ts';
import { ChdbStorage } from '../storage/chdb.ts';
import { ClickhouseServerStorage } from '../storage/clickhouse.ts';
import { TABLE_COLUMNS, type SchemaOptions, type TableName } from '../storage/schema.ts';
import type { Storage } from '../storage/storage.ts';

/** Base URL agents reach the ingest HTTP port at: SLUICE_PUBLIC_URL, else this host. */
export function publicUrl(config: Readonly<SluiceConfig>, port = config.http.port): string {
  return (config.http.publicUrl || `http://localhost:${port}`).replace(/\/+$/, '');
}

/** How `sluice migrate` (and an embedded start) creates the tables. */
export function schemaOptions(config: Readonly<SluiceConfig>): SchemaOptions {
  const options: SchemaOptions = {};
  if (config.clickhouse.cluster) options.cluster = config.clickhouse.cluster;
  if (config.clickhouse.replicated) options.replicated = true;
  if (config.storage.ttlDays > 0) {
    options.ttlDays = Object.fromEntries(Object.keys(TABLE_COLUMNS).map((table) => [table, config.storage.ttlDays])) as Record<TableName, number>;
  }
  return options;
}

export interface StorageChoice {
  /**
   * Create or upgrade the schema in start(). The embedded engine always does; a server does
   * only for `sluice serve` (one process) — cluster consumers leave it to `sluice migrate`,
   * so they do not race each other.
   */
  migrateOnStart: boolean;
}

/** chDB under the data dir, or a ClickHouse server when CLICKHOUSE_URL is set. */
export function createStorage(config: Readonly<SluiceConfig>, choice: StorageChoice): Storage {
  const schema = schemaOptions(config);
  if (!config.clickhouse.url) return new ChdbStorage(config.dataDir, config.storage.database, schema);
  return new ClickhouseServerStorage({
    url: config.clickhouse.url,
    database: config.storage.database,
    migrateOnStart: choice.migrateOnStart,
    schema,
  });
}

/** Logs which storage runs, once it started; warns where a server cannot deduplicate. */
export function announceStorage(storage: Storage, log: Logger): void {
  if (!(storage instanceof ClickhouseServerStorage)) return;
  log.info({ clickhouse: storage.safeUrl, version: storage.serverVersion }, 'storage: ClickHouse server');
  if (!storage.dedupTokens) {
    log.warn({ version: storage.serverVersion }, 'this ClickHouse server has no insert_deduplication_token: a redelivered batch may be stored twice');
  }
}

/** The NATS connection of cluster mode (NATS_URL), or undefined on the embedded default. */
export async function connectNats(config: Readonly<SluiceConfig>, log: Logger): Promise<NatsConnection | undefined> {
  if (!config.nats.url) return undefined;
  const servers = config.nats.url.split(',').map((s) => s.trim());
  // The servers may carry user:password@ or token@: only their redacted form is ever shown.
  const shown = redactNatsServers(servers);
  try {
    const nc = await connect({ servers, name: 'sluice', maxReconnectAttempts: -1, timeout: 5000 });
    log.info({ servers: shown, server: nc.getServer() }, 'connected to NATS');
    return nc;
  } catch (err) {
    // No `cause`: the client's error may hold the URL it was given (an invalid URL's `input`).
    throw new Error(`cannot reach NATS at ${shown.join(', ')}: ${(err as Error).message}`);
  }
}

/** Sources, key hashes and configs: a local file store, or NATS KV shared by every gateway. */
export function createStateStore(config: Readonly<SluiceConfig>, nc: NatsConnection | undefined): StateStore {
  if (!nc) return new LocalStateStore(join(config.dataDir, 'state'));
  return new NatsKvStateStore(nc, { bucketPrefix: `${config.nats.prefix.toLowerCase()}_`, replicas: config.nats.replicas });
}

/** The in-process group-commit queue, or JetStream streams consumed by any number of processes. */
export function createBus(config: Readonly<SluiceConfig>, nc: NatsConnection | undefined, log: Logger): Bus & { backlogBytes?: number } {
  if (!nc) {
    return new MemoryBus({
      maxPendingBytes: config.storage.maxPendingBytes,
      maxBatchBytes: Math.min(64 * 1024 * 1024, config.storage.maxPendingBytes),
      timeoutMs: config.storage.timeoutMs,
      retryAfterSeconds: config.storage.retryAfterSeconds,
    });
  }
  return new JetStreamBus(nc, {
    prefix: config.nats.prefix,
    tables: Object.keys(TABLE_COLUMNS),
    replicas: config.nats.replicas,
    maxStreamBytes: config.nats.maxStreamBytes,
    retryAfterSeconds: config.storage.retryAfterSeconds,
    consumer: { replicas: config.nats.replicas, ackWaitMs: config.nats.ackWaitSeconds * 1000, log },
  });
}

/** Rows per bus message: JetStream messages stay under max_payload (1 MiB by default). */
export function maxChunkBytes(nc: NatsConnection | undefined): number {
  return nc ? 512 * 1024 : Infinity;
}

/** Per-IP token buckets: in process, or in Redis shared by every gateway (with local fallback). */
export async function createLimiter(config: Readonly<SluiceConfig>, log: Logger): Promise<Limiter> {
  const buckets = { ratePerMinute: config.limits.ratePerMinute, burst: config.limits.rateBurst };
  if (!config.redis.url) return new TokenBucketLimiter(buckets);
  const redis = createClient({
    url: config.redis.url,
    // Commands fail at once while disconnected (the limiter falls back); reconnects go on.
    disableOfflineQueue: true,
    socket: { connectTimeout: 1000, reconnectStrategy: (retries) => Math.min(100 * 2 ** retries, 5000) },
  });
  redis.on('error', () => {}); // reported by the limiter as a fallback, once
  // connect() does not settle while Redis is down (the client keeps reconnecting): wait for the
  // first answer either way, then let the reconnects go on in the background.
  const connecting = redis.connect();
  connecting.catch(() => {}); // rejects only when the client is closed before it ever connected
  const failed = await Promise.race([connecting.then(() => undefined), new Promise<Error>((resolve) => redis.once('error', resolve))]);
  if (failed) log.warn({ redis: redactUrl(config.redis.url), err: failed.message }, 'Redis unreachable at start; rate limits fall back to this gateway');
  const closeClient = async () => {
    // quit() never settles on a client that is still reconnecting: that one is destroyed.
    if (redis.isReady) await redis.quit().catch(() => redis.destroy());
    else if (redis.isOpen) redis.destroy();
  };
  return new RedisTokenBucketLimiter(redis, { ...buckets, closeClient }, log);
}
