/**
 * ClickhouseServerStorage: the cluster driver. Talks HTTP to a ClickHouse server (or a load
 * balancer in front of a cluster) through @clickhouse/client, and runs the same SQL as the
 * embedded engine. The pipeline's RowBinary goes to the server as the request body untouched:
 * no decode, no re-encode.
 *
 * Unlike ChdbStorage it does not migrate on start by default: N consumers starting together
 * would all run DDL against the cluster. `sluice migrate` runs migrations once.
 *
 * Errors: an insert the server refuses because of the rows themselves (a parse error) is
 * permanent — retrying the same bytes cannot succeed — and is thrown as `bad_request`, so the
 * consumer dead-letters it. Everything else (no connection, timeout, a proxy's 5xx, too many
 * parts, a missing table, bad credentials) is the server's to fix and is thrown as
 * `unavailable`: the consumer backs off and the batch stays on the bus.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Readable } from 'node:stream';
import { ClickHouseLogLevel, createClient, type ClickHouseClient, type ClickHouseSettings, type DataFormat } from '@clickhouse/client';
import { SluiceError } from '../core/errors.ts';
import { redactUrl } from '../core/redact.ts';
import { clickhouseException, describeException, insertError } from './errors.ts';
import { migrate } from './migrate.ts';
import type { SchemaOptions } from './schema.ts';
import { quoteIdentifier, type InsertBatch, type Storage, type StorageDescription } from './storage.ts';

export interface ClickhouseServerOptions {
  /** Server URL with credentials, `http(s)://user:password@host:8123` (CLICKHOUSE_URL). Required. */
  url: string;
  /** Database holding Sluice's tables. Default 'otel'. */
  database?: string;
  /** Run migrations in start(). Default false: on a cluster `sluice migrate` runs them once. */
  migrateOnStart?: boolean;
  /** How migrations create the tables (ON CLUSTER, Replicated, TTL), and with `distributed` how inserts are sent. Default {}: plain MergeTree. */
  schema?: SchemaOptions;
  /** Timeout of one HTTP request in ms; a timed-out insert is retryable. Default 30000. */
  requestTimeoutMs?: number;
  /** Most HTTP connections open at once, inserts and queries together. Default 10. */
  maxOpenConnections?: number;
}

export class ClickhouseServerStorage implements Storage {
  /** The URL without its password, for messages and logs. */
  readonly safeUrl: string;
  private client: ClickHouseClient | undefined;
  private readonly database: string;
  private version: string | undefined;
  private tokens = false;
  private partitionLimit = false;

  constructor(private readonly options: ClickhouseServerOptions) {
    // Not echoed: a malformed URL may still contain the password.
    if (!URL.canParse(options.url)) throw new Error('the ClickHouse URL is not a valid URL');
    this.safeUrl = redactUrl(options.url);
    this.database = options.database ?? 'otel';
  }

  /** The server's version(), known after start(). */
  get serverVersion(): string | undefined {
    return this.version;
  }

  /**
   * Whether the server takes insert_deduplication_token (newer servers; not 18.16), known after start().
   * Without it a redelivered batch is stored twice: the app should warn.
   */
  get dedupTokens(): boolean {
    return this.tokens;
  }

  describe(): StorageDescription {
    return {
      engine: 'clickhouse-server',
      location: this.safeUrl,
      version: this.version,
      warnings: this.tokens ? [] : ['this ClickHouse server has no insert_deduplication_token: a redelivered batch may be stored twice'],
    };
  }

  async start(): Promise<void> {
    this.client = createClient({
      url: this.options.url,
      request_timeout: this.options.requestTimeoutMs ?? 30_000,
      max_open_connections: this.options.maxOpenConnections ?? 10,
      // Sent in each request's User-Agent (system.query_log's http_user_agent): which process
      // of a fleet ran a statement.
      application: `sluice (host ${hostname()}, pid ${process.pid})`,
      // Every failure is thrown to the caller, which logs it once with context.
      log: { level: ClickHouseLogLevel.OFF },
    });
    const ping = await this.client.ping();
    if (!ping.success) {
      await this.shutdown();
      throw new SluiceError('unavailable', `cannot reach ClickHouse at ${this.safeUrl}: ${ping.error.message}`, { cause: ping.error });
    }
    // /ping does not check credentials; a query does, and tells what the server can do.
    try {
      const probe = JSON.parse(await this.query(
        "SELECT version() AS version, (SELECT count() FROM system.settings WHERE name = 'insert_deduplication_token') AS dedup, " +
          "(SELECT count() FROM system.settings WHERE name = 'max_partitions_per_insert_block') AS partitions",
      ));
      this.version = String(probe.version);
      this.tokens = Number(probe.dedup) > 0;
      this.partitionLimit = Number(probe.partitions) > 0;
      if (this.options.migrateOnStart) await migrate(this, this.database, this.options.schema);
    } catch (err) {
      await this.shutdown();
      throw new SluiceError('unavailable', `cannot use ClickHouse at ${this.safeUrl}: ${(err as Error).message}`, { cause: err });
    }
  }

  async shutdown(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.close();
  }

  async insert(batch: InsertBatch): Promise<void> {
    const client = this.started();
    if (batch.chunks.every((chunk) => chunk.byteLength === 0)) return;
    const table = `${quoteIdentifier(this.database)}.${quoteIdentifier(batch.table)}`;
    const settings: ClickHouseSettings = {};
    // Deduplicate by token only: two identical requests are two acknowledged writes. Replicated
    // tables (and ours, with a dedup window) would otherwise drop a block whose bytes match an
    // earlier one — hence a unique token when the bus gave none.
    if (this.tokens) settings.insert_deduplication_token = batch.dedupToken ?? `unique:${randomUUID()}`;
    // A batch holds many requests, each within MAX_REQUEST_PARTITIONS (refused at the door), so
    // it may span more partitions than ClickHouse's default of 100 per insert: lifted here.
    if (this.partitionLimit) settings.max_partitions_per_insert_block = '0';
    // Into a Distributed table: answered once every shard stored its rows (one replica each),
    // so the ack that follows means stored, not queued on this node's disk. Each shard's insert
    // carries the token (ClickHouse forwards the query's settings), and the sharding keys split a
    // batch the same way every time: a batch retried after one shard failed is stored by that
    // shard and dropped as a duplicate by the others. The old name: every version knows it.
    if (this.options.schema?.distributed) settings.insert_distributed_sync = 1;
    try {
      const result = await client.exec({
        query: `INSERT INTO ${table} (${batch.columns.map(quoteIdentifier).join(', ')}) FORMAT RowBinary`,
        values: Readable.from(batch.chunks, { objectMode: false }),
        clickhouse_settings: settings,
      });
      await readText(result.stream);
    } catch (err) {
      throw this.insertError(err, table);
    }
  }

  async query(sql: string, format = 'JSONEachRow'): Promise<string> {
    const client = this.started();
    try {
      // default_format applies when the SQL has no FORMAT clause of its own, DDL included.
      const result = await client.exec({ query: sql, clickhouse_settings: { default_format: format as DataFormat } });
      return await readText(result.stream);
    } catch (err) {
      const exception = clickhouseException(err);
      if (!exception) throw this.unavailable(err);
      throw new Error(`ClickHouse error ${describeException(exception)}`, { cause: err });
    }
  }

  private insertError(err: unknown, table: string): SluiceError {
    const exception = clickhouseException(err);
    // A table or database that is not there yet: the schema is missing, not the rows at fault.
    const hint = exception?.code === 60 || exception?.code === 81 ? ' (has `sluice migrate` run?)' : '';
    if (!exception) return this.unavailable(err);
    return insertError(err, `${table} at ${this.safeUrl}`, () => true, hint);
  }

  private unavailable(err: unknown): SluiceError {
    const reason = err instanceof Error ? err.message : String(err);
    return new SluiceError('unavailable', `ClickHouse at ${this.safeUrl} is unavailable: ${reason}`, { cause: err });
  }

  private started(): ClickHouseClient {
    if (!this.client) throw new Error('storage is not started');
    return this.client;
  }
}

async function readText(stream: AsyncIterable<Buffer>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part);
  return Buffer.concat(parts).toString('utf8');
}
