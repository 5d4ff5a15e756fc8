/**
 * ChdbStorage: the embedded default. The ClickHouse engine runs in process (chDB) with its
 * data under <dataDir>/clickhouse. chDB's raw insert takes text formats only, so RowBinary goes
 * through a file: the chunks are written to a temp file and read by the insert's SELECT from
 * file() (100k rows in ~120 ms here, see FINDINGS). queryAsync runs off the event loop.
 *
 * file() reads the rows with their LowCardinality columns declared as plain strings (the same
 * bytes in RowBinary), and ClickHouse builds the dictionaries a column at a time when it
 * converts them for the table: read as LowCardinality, every value costs a dictionary insert of
 * its own, and the insert cost chDB half as much CPU again (bench/README.md, *chDB by input format*).
 *
 * Those files live in <dataDir>/clickhouse/sluice-scratch, a directory of Sluice's own
 * (0700: they hold the rows). At start only our own leftovers (insert-*.bin) are removed there:
 * nothing else is ever deleted, whatever the data dir points at.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, open, readdir, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Session } from 'chdb';
import { SluiceError } from '../core/errors.ts';
import type { ChdbMemoryLimits } from '../core/memory-budget.ts';
import { engineArgs, writeEngineConfig } from './chdb-engine.ts';
import { ChdbReader } from './chdb-reader.ts';
import { openChdbSession } from './chdb-session.ts';
import { insertError } from './errors.ts';
import { migrate } from './migrate.ts';
import type { SchemaOptions } from './schema.ts';
import { queryRows, quoteIdentifier, quoteString, type InsertBatch, type Storage, type StorageDescription } from './storage.ts';

const DURABLE_PARTS = 'fsync_after_insert = 1, fsync_part_directory = 1, min_compressed_bytes_to_fsync_after_merge = 1';

/**
 * A batch holds many requests, each within MAX_REQUEST_PARTITIONS (refused at the door), so it
 * may span more partitions than ClickHouse's default of 100 per insert: lifted for our inserts.
 */
const UNLIMITED_PARTITIONS = 'max_partitions_per_insert_block = 0';

/** Where chDB keeps its files under the data dir. */
export function chdbEngineDir(dataDir: string): string {
  return resolve(dataDir, 'clickhouse');
}

/** The insert files this driver writes (and the only files it deletes at start). */
const INSERT_FILE = /^insert-\d+-\d+\.bin$/;

export class ChdbStorage implements Storage {
  /** The writer: inserts only, whose output is nothing. */
  private session: Session | undefined;
  /**
   * Every other statement runs on a connection of the pool, closed after a failure: chDB hands
   * a failed statement's output to the next statement of its connection (storage/chdb-reader.ts),
   * which would put a failed `sluice query`'s rows in front of the next answer.
   */
  private statements: ChdbReader | undefined;
  private readonly scratchDir: string;
  private readonly engineDir: string;
  private insertSeq = 0;
  /** Per table, each column's type as the insert reads it from RowBinary (inputType). */
  private readonly inputTypes = new Map<string, Map<string, string>>();

  constructor(
    dataDir: string,
    private readonly database: string,
    /** How the tables are created (ttlDays is the one that fits one machine). Default: no TTL. */
    private readonly schema: SchemaOptions = {},
    /** The engine's memory limits (from the memory budget; storage/chdb-engine.ts). Default: chDB's own. */
    private readonly limits?: ChdbMemoryLimits,
  ) {
    this.engineDir = chdbEngineDir(dataDir);
    this.scratchDir = join(this.engineDir, 'sluice-scratch');
  }

  async start(): Promise<void> {
    await mkdir(this.scratchDir, { recursive: true, mode: 0o700 });
    // Files of a process that died mid-insert; the data-dir lock says none of ours is running.
    for (const name of await readdir(this.scratchDir)) {
      if (INSERT_FILE.test(name)) await rm(join(this.scratchDir, name), { force: true });
    }
    await writeEngineConfig(this.engineDir, this.limits);
    const args = engineArgs(this.engineDir, this.limits);
    this.session = await openChdbSession(this.engineDir, args);
    this.statements = new ChdbReader(this.engineDir, args);
    await migrate(this, this.database, this.schema);
    await this.syncPartsToDisk();
  }

  /**
   * The local log (bus/local-log.ts) deletes rows once their insert returned, so an inserted or
   * merged part must be on disk by then, power loss included: ClickHouse does not fsync parts by
   * default, and chDB drops merged-away parts at once (old_parts_lifetime 0). With inserts of a
   * second's rows at a time this costs no CPU measurably (bench/chdb-batches.ts: 26.6 against
   * 28.3 CPU-s per million spans without, within noise).
   */
  private async syncPartsToDisk(): Promise<void> {
    // Only tables that do not have it yet (new ones, or a data dir from before): start does no needless DDL.
    const tables = await queryRows<{ name: string }>(
      this,
      `SELECT name FROM system.tables WHERE database = ${quoteString(this.database)} AND engine LIKE '%MergeTree' AND position(create_table_query, 'min_compressed_bytes_to_fsync_after_merge = 1') = 0`,
    );
    for (const { name } of tables) {
      await this.query(`ALTER TABLE ${quoteIdentifier(this.database)}.${quoteIdentifier(name)} MODIFY SETTING ${DURABLE_PARTS}`);
    }
  }

  async shutdown(): Promise<void> {
    await this.statements?.shutdown();
    this.statements = undefined;
    this.session?.close();
    this.session = undefined;
  }

  async insert(batch: InsertBatch): Promise<void> {
    const file = join(this.scratchDir, `insert-${process.pid}-${++this.insertSeq}.bin`);
    try {
      const handle = await open(file, 'w', 0o600);
      try {
        await handle.writev(batch.chunks as Uint8Array[]);
      } finally {
        await handle.close();
      }
      const columns = batch.columns.map(quoteIdentifier).join(', ');
      // Deduplicate by token only: two identical requests are two acknowledged writes. (The
      // tables' dedup window would otherwise drop a block whose bytes match an earlier one, and
      // insert_deduplicate = 0 does not switch that off for a plain MergeTree.)
      const token = batch.dedupToken ?? `unique:${randomUUID()}`;
      const settings = ` SETTINGS insert_deduplication_token = ${quoteString(token)}, ${UNLIMITED_PARTITIONS}`;
      if (!this.session) throw new SluiceError('unavailable', 'storage is not started');
      const into = `INSERT INTO ${quoteIdentifier(this.database)}.${quoteIdentifier(batch.table)} (${columns})`;
      const structure = await this.inputStructure(batch.table, batch.columns);
      await this.session.queryAsync(
        structure === undefined
          ? `${into} FROM INFILE ${quoteString(file)}${settings} FORMAT RowBinary` // columns the table lacks: ClickHouse says so
          : `${into}${settings} SELECT * FROM file(${quoteString(file)}, 'RowBinary', ${quoteString(structure)})`,
      );
    } catch (err) {
      throw insertError(err, batch.table, isEngineUnavailable);
    } finally {
      await rm(file, { force: true });
    }
  }

  /** The columns with the types the insert reads them as; undefined if the table lacks one of them. */
  private async inputStructure(table: string, columns: readonly string[]): Promise<string | undefined> {
    let types = this.inputTypes.get(table);
    if (!types) {
      const rows = await queryRows<{ name: string; type: string }>(
        this,
        `SELECT name, type FROM system.columns WHERE database = ${quoteString(this.database)} AND table = ${quoteString(table)}`,
      );
      types = new Map(rows.map(({ name, type }) => [name, inputType(type)]));
      if (types.size > 0) this.inputTypes.set(table, types); // migrations run before the first insert
    }
    const declared: string[] = [];
    for (const column of columns) {
      const type = types.get(column);
      if (type === undefined) return undefined;
      declared.push(`${quoteIdentifier(column)} ${type}`);
    }
    return declared.join(', ');
  }

  describe(): StorageDescription {
    return { engine: 'chdb', location: this.engineDir, warnings: [] };
  }

  async query(sql: string, format = 'JSONEachRow'): Promise<string> {
    if (!this.statements) throw new SluiceError('unavailable', 'storage is not started');
    const { bytes } = await this.statements.run('default', sql, { format });
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  }
}

/** A column's type as RowBinary carries it: LowCardinality(T) is written as T. */
export function inputType(type: string): string {
  return type.replace(/LowCardinality\(((?:[^()]|\([^()]*\))*)\)/g, '$1');
}

/** The scratch file could not be written (disk full, permissions): storage is unavailable, the rows are not at fault. */
function isEngineUnavailable(err: unknown): boolean {
  return typeof (err as NodeJS.ErrnoException)?.code === 'string' && (err as NodeJS.ErrnoException).code!.startsWith('E');
}
