/**
 * Storage: where rows land. Drivers: ChdbStorage (embedded, the ClickHouse engine in process)
 * and, in cluster mode, a ClickHouse server. Both take RowBinary built by the pipeline and run
 * the same SQL.
 */
export interface InsertBatch {
  table: string;
  /** The columns each RowBinary row carries, in order. */
  columns: readonly string[];
  /** RowBinary chunks, inserted as one statement (one part). */
  chunks: readonly Uint8Array[];
  /**
   * ClickHouse insert_deduplication_token: an insert repeated with the same token (a
   * redelivered bus batch) is dropped by the engine instead of stored twice.
   */
  dedupToken?: string;
}

export interface Storage {
  /** Opens the storage and brings the schema up to date. */
  start(): Promise<void>;
  shutdown(): Promise<void>;
  insert(batch: InsertBatch): Promise<void>;
  /** Runs one SQL statement and returns its output in `format` (default JSONEachRow). */
  query(sql: string, format?: string): Promise<string>;
  /** What runs where, for the start-up log; known after start(). */
  describe(): StorageDescription;
}

export interface StorageDescription {
  engine: 'chdb' | 'clickhouse-server';
  /** The data directory, or the server URL without credentials. */
  location: string;
  version?: string;
  /** What an operator should know (e.g. a server that cannot deduplicate redelivered batches). */
  warnings: string[];
}

/**
 * The storage with every query run after `before` settles: on the embedded default, reads wait
 * for the rows acknowledged before them to leave the local log (bus/local-log.ts#settled).
 */
export function readsAfter(storage: Storage, before: () => Promise<void>): Storage {
  return {
    start: () => storage.start(),
    shutdown: () => storage.shutdown(),
    insert: (batch) => storage.insert(batch),
    describe: () => storage.describe(),
    async query(sql, format) {
      await before();
      return storage.query(sql, format);
    },
  };
}

/** Quotes a ClickHouse identifier (table or column name, dots kept inside backticks). */
export function quoteIdentifier(name: string): string {
  return '`' + name.replaceAll('\\', '\\\\').replaceAll('`', '\\`') + '`';
}

/** Quotes a ClickHouse string literal. */
export function quoteString(value: string): string {
  return "'" + value.replaceAll('\\', '\\\\').replaceAll("'", "\\'") + "'";
}

const READ_ONLY_STATEMENT = /^\s*(select|with|show|describe|desc|explain|exists)\b/i;

/**
 * `sluice query` runs read-only SQL only: one statement that starts with a reading keyword.
 * (The operator running it already owns the data dir; this guards against slips, not attacks.)
 */
export function assertReadOnlySql(sql: string): void {
  const trimmed = sql.trim().replace(/;\s*$/, '');
  if (!READ_ONLY_STATEMENT.test(trimmed) || trimmed.includes(';')) {
    throw new Error('only one read-only statement (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, EXISTS) is allowed');
  }
}

/** The rows of a query, each a parsed JSONEachRow line. */
export async function queryRows<T>(storage: Storage, sql: string): Promise<T[]> {
  const text = await storage.query(sql, 'JSONEachRow');
  return text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as T);
}
