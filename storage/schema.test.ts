import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Session } from 'chdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { layoutProblem, migrate, type SqlRunner } from './migrate.ts';
import { MIGRATIONS, SHARDING_KEYS, storedName, TABLE_COLUMNS, validateSchemaOptions, type SchemaOptions, type ShardedTable } from './schema.ts';

const TRACE_ID_TS_MIGRATION = MIGRATIONS.find((m) => m.version === 5)!;

let dir: string;
let session: Session;
let runner: SqlRunner;
const rows = (sql: string) => session.query(sql, 'JSONEachRow').split('\n').filter(Boolean).map((line) => JSON.parse(line));

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sluice-schema-'));
  // The cluster `prod` of two shards, for Distributed tables to name (nothing listens there:
  // creating one does not connect, and the tests below never read or write through one).
  const config = join(dir, 'cluster.xml');
  const shard = (port: number) => `<shard><internal_replication>true</internal_replication><replica><host>127.0.0.1</host><port>${port}</port></replica></shard>`;
  writeFileSync(config, `<clickhouse><remote_servers><prod>${shard(1)}${shard(2)}</prod></remote_servers></clickhouse>`);
  const { Session } = await import('chdb');
  session = new Session(join(dir, 'engine'), { connectionArgs: [`--config-file=${config}`] });
  runner = { query: async (sql, format = 'CSV') => session.query(sql, format) };
});
afterAll(() => {
  session?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('storage schema', () => {
  it('migrates a fresh database once, into the database it is given', async () => {
    const first = await migrate(runner, 'telemetry_a');
    expect(first.applied.map((m) => m.version)).toEqual(MIGRATIONS.map((m) => m.version));
    const again = await migrate(runner, 'telemetry_a');
    expect(again).toEqual({ applied: [], current: first.current });
    const tables = rows("SELECT name, engine FROM system.tables WHERE database = 'telemetry_a' ORDER BY name");
    expect(tables.map((t) => t.name)).toEqual([
      'agent_heartbeats', 'agent_logs', 'agent_metrics', 'deploy_markers', 'ingest_counts', 'otel_logs', 'otel_metrics_exp_histogram', 'otel_metrics_gauge', 'otel_metrics_histogram', 'otel_metrics_sum',
      'otel_metrics_summary', 'otel_traces', 'otel_traces_trace_id_ts', 'otel_traces_trace_id_ts_mv', 'relay_delivery_attempts', 'relay_delivery_jobs', 'relay_submissions',
      'sluice_schema_migrations',
    ]);
  });

  it('puts SourceId first in every sort key (TenantId in the relay\'s)', async () => {
    await migrate(runner, 'telemetry_b');
    for (const { name, sorting_key, primary_key } of rows("SELECT name, sorting_key, primary_key FROM system.tables WHERE database = 'telemetry_b' AND startsWith(name, 'otel_') AND engine LIKE '%MergeTree'")) {
      expect(sorting_key, name).toMatch(/^SourceId, /);
      expect(primary_key, name).toMatch(/^SourceId(, |$)/);
    }
    for (const { name, sorting_key } of rows("SELECT name, sorting_key FROM system.tables WHERE database = 'telemetry_b' AND startsWith(name, 'relay_')")) {
      expect(sorting_key, name).toMatch(/^TenantId, /);
    }
  });

  it('has every column the transcoder writes, with the exporter types', async () => {
    await migrate(runner, 'telemetry_c');
    const types = new Map<string, string>();
    for (const { table, name, type } of rows("SELECT table, name, type FROM system.columns WHERE database = 'telemetry_c'")) types.set(`${table}.${name}`, type);
    for (const [table, columns] of Object.entries(TABLE_COLUMNS)) {
      for (const column of columns) expect(types.has(`${table}.${column}`), `${table}.${column}`).toBe(true);
      // Telemetry belongs to a source; the relay's rows to a tenant.
      expect(types.get(`${table}.${table.startsWith('relay_') ? 'TenantId' : 'SourceId'}`), table).toBe('LowCardinality(String)');
    }
    expect(types.get('relay_submissions.SubmissionId')).toBe('UUID');
    expect(types.get('otel_traces.Timestamp')).toBe('DateTime64(9)');
    expect(types.get('otel_traces.Duration')).toBe('UInt64');
    expect(types.get('otel_traces.SpanAttributes')).toBe('Map(LowCardinality(String), String)');
    expect(types.get('otel_traces.Events.Timestamp')).toBe('Array(DateTime64(9))');
    expect(types.get('otel_logs.SeverityNumber')).toBe('UInt8');
    expect(types.get('otel_metrics_sum.TimeUnix')).toBe('DateTime');
    expect(types.get('otel_metrics_sum.IsMonotonic')).toBe('Bool');
    expect(types.get('otel_metrics_histogram.BucketCounts')).toBe('Array(UInt64)');
    expect(types.get('otel_metrics_exp_histogram.Scale')).toBe('Int32');
    expect(types.get('otel_metrics_summary.ValueAtQuantiles.Quantile')).toBe('Array(Float64)');
  });

  it('keeps the exporter indexes and partitioning, without a TTL', async () => {
    await migrate(runner, 'telemetry_d');
    const indexes = rows("SELECT table, name FROM system.data_skipping_indices WHERE database = 'telemetry_d'").map((i) => `${i.table}.${i.name}`);
    expect(indexes).toEqual(expect.arrayContaining([
      'otel_traces.idx_trace_id', 'otel_traces.idx_span_attr_key', 'otel_traces.idx_duration', 'otel_traces.idx_lower_span_name',
      'otel_logs.idx_trace_id', 'otel_logs.idx_log_attr_value', 'otel_logs.idx_lower_body',
      'otel_metrics_gauge.idx_attr_key', 'otel_metrics_summary.idx_time_minmax',
    ]));
    for (const { name, partition_key, create_table_query } of rows("SELECT name, partition_key, create_table_query FROM system.tables WHERE database = 'telemetry_d' AND engine LIKE '%MergeTree' AND startsWith(name, 'otel_')")) {
      expect(partition_key, name).toMatch(/^(toDate|toStartOfWeek)\(/);
      expect(create_table_query, name).not.toMatch(/\bTTL\b/);
    }
  });
});

describe('schema options', () => {
  const CLUSTER = { cluster: 'prod' };
  const REPLICATED = { replicated: true };
  const TTL = { ttlDays: { otel_traces: 7, otel_logs: 3, otel_metrics_gauge: 30 } };
  const DISTRIBUTED = { ...CLUSTER, distributed: true };
  const COMBINATIONS: Record<string, SchemaOptions> = {
    default: {}, cluster: CLUSTER, replicated: REPLICATED, ttl: TTL,
    'cluster+replicated': { ...CLUSTER, ...REPLICATED }, 'all three': { ...CLUSTER, ...REPLICATED, ...TTL },
    distributed: DISTRIBUTED, 'distributed+replicated+ttl': { ...DISTRIBUTED, ...REPLICATED, ...TTL },
  };
  /** Every statement migrate() sends to an empty database, the ledger's included (`all`: its INSERTs and SELECTs too). */
  const sent = async (options: SchemaOptions, all = false) => {
    const statements: string[] = [];
    // This server answers every query with nothing: no tables, so nothing to verify either.
    const unverified = MIGRATIONS.map(({ verify: _, ...migration }) => migration);
    await migrate({ query: async (sql) => (statements.push(sql), '') }, 'otel', options, unverified);
    return statements.filter((sql) => all || sql.startsWith('CREATE'));
  };
  /** The table's last CREATE: what a fresh database ends with. */
  const tableDdl = (statements: string[], table: string) => statements.filter((sql) => sql.startsWith(`CREATE TABLE IF NOT EXISTS \`otel\`.\`${table}\` `)).at(-1)!;
  const TABLES = [...Object.keys(TABLE_COLUMNS), 'otel_traces_trace_id_ts', 'sluice_schema_migrations'];

  it('defaults to plain MergeTree on this server, without TTL', async () => {
    const statements = await sent({});
    expect(statements.join('\n')).not.toMatch(/ON CLUSTER|Replicated|\bTTL\b/);
    for (const table of TABLES) {
      // Heartbeats keep the latest report per agent: a ReplacingMergeTree on LastSeen; the trace
      // id lookup one row per trace, as the exporter's: an AggregatingMergeTree; the ingest counts
      // one row per bucket and key, summed.
      const engine = table === 'agent_heartbeats' ? /ENGINE = ReplacingMergeTree\(LastSeen\)\n/
        : table === 'otel_traces_trace_id_ts' ? /ENGINE = AggregatingMergeTree\n/
          : table === 'ingest_counts' ? /ENGINE = SummingMergeTree\(\(Requests, Items\)\)\n/ : /ENGINE = MergeTree\b(?!\()/;
      expect(tableDdl(statements, table), table).toMatch(engine);
    }
  });

  it('adds ON CLUSTER to every CREATE, the database and the ledger included', async () => {
    const statements = await sent(CLUSTER);
    expect(statements).toHaveLength(MIGRATIONS.reduce((n, m) => n + m.statements('otel', {}, new Map()).length, 0) + 2);
    for (const sql of statements) expect(sql).toMatch(/^CREATE (DATABASE|TABLE|MATERIALIZED VIEW) IF NOT EXISTS `otel`(\.`\w+`)? ON CLUSTER `prod`([ (\n]|$)/);
  });

  it('uses ReplicatedMergeTree for every table, the ledger included, with dedup left to Keeper', async () => {
    const statements = await sent(REPLICATED);
    for (const table of TABLES) {
      const ddl = tableDdl(statements, table);
      const family = { agent_heartbeats: 'ReplacingMergeTree', otel_traces_trace_id_ts: 'AggregatingMergeTree', ingest_counts: 'SummingMergeTree' }[table] ?? 'MergeTree';
      const args = { agent_heartbeats: ', LastSeen', ingest_counts: ', (Requests, Items)' }[table] ?? '';
      const engine = `ENGINE = Replicated${family}('/clickhouse/tables/{shard}/{database}/{table}', '{replica}'${args})`;
      expect(ddl, table).toContain(engine);
      expect(ddl, table).not.toContain('non_replicated_deduplication_window');
    }
  });

  it('puts a TTL on the tables given, on their time column, and only there', async () => {
    const statements = await sent(TTL);
    expect(tableDdl(statements, 'otel_traces')).toContain('\nTTL toDateTime(Timestamp) + toIntervalDay(7)\nSETTINGS');
    expect(tableDdl(statements, 'otel_traces_trace_id_ts')).toContain('\nTTL toDateTime(Start) + toIntervalDay(7)\nSETTINGS');
    expect(tableDdl(statements, 'otel_logs')).toContain('\nTTL toDateTime(Timestamp) + toIntervalDay(3)\nSETTINGS');
    expect(tableDdl(statements, 'otel_metrics_gauge')).toContain('\nTTL TimeUnix + toIntervalDay(30)\nSETTINGS');
    // The lookup twice: created by migration 1, and again, aggregating, by migration 5.
    expect(statements.filter((sql) => /\bTTL\b/.test(sql))).toHaveLength(5);
  });

  it('combines the options', async () => {
    const ddl = tableDdl(await sent(COMBINATIONS['all three']!), 'otel_logs');
    expect(ddl).toMatch(/^CREATE TABLE IF NOT EXISTS `otel`\.`otel_logs` ON CLUSTER `prod` \(/);
    expect(ddl).toMatch(/\) ENGINE = ReplicatedMergeTree\(.*\)\nPARTITION BY .*\nORDER BY .*\nTTL toDateTime\(Timestamp\) \+ toIntervalDay\(3\)\nSETTINGS index_granularity = 8192, ttl_only_drop_parts = 1$/);
  });

  // chDB has no Keeper and no cluster, so Replicated and ON CLUSTER DDL cannot run here: the
  // engine's own parser checks that every combination is valid ClickHouse SQL.
  it('generates SQL that ClickHouse parses, for every combination', async () => {
    // Migration 5 as it finds a database of before it: the lookup a MergeTree of its kind.
    const converting = (options: SchemaOptions) =>
      TRACE_ID_TS_MIGRATION.statements('otel', options, new Map([[storedName('otel_traces_trace_id_ts', options), options.replicated ? 'ReplicatedMergeTree' : 'MergeTree']]));
    for (const [name, options] of Object.entries(COMBINATIONS)) {
      // Every statement, the ledger's INSERT and SELECTs included.
      for (const sql of [...await sent(options, true), ...converting(options)]) {
        expect(() => session.query(`EXPLAIN AST ${sql}`, 'TSV'), `${name}: ${sql.slice(0, 80)}`).not.toThrow();
      }
    }
    const swap = converting({ ...CLUSTER, ...REPLICATED });
    expect(swap.slice(1, 4)).toEqual([
      'EXCHANGE TABLES `otel`.`otel_traces_trace_id_ts` AND `otel`.`otel_traces_trace_id_ts_swap` ON CLUSTER `prod`',
      'ALTER TABLE `otel`.`otel_traces_trace_id_ts` ON CLUSTER `prod` ATTACH PARTITION ALL FROM `otel`.`otel_traces_trace_id_ts_swap`',
      'DROP TABLE IF EXISTS `otel`.`otel_traces_trace_id_ts_swap` ON CLUSTER `prod` SYNC',
    ]);
    expect(swap[0]).toContain("ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')");
  });

  it('in distributed mode stores each table as <table>_local and puts a Distributed table of the plain name over it', async () => {
    const statements = await sent({ ...DISTRIBUTED, ...REPLICATED }, true);
    for (const table of TABLES as ShardedTable[]) {
      const local = statements.findIndex((sql) => sql.startsWith(`CREATE TABLE IF NOT EXISTS \`otel\`.\`${table}_local\` ON CLUSTER \`prod\` (`));
      const distributed = statements.indexOf(
        `CREATE TABLE IF NOT EXISTS \`otel\`.\`${table}\` ON CLUSTER \`prod\` AS \`otel\`.\`${table}_local\`\n` +
          `ENGINE = Distributed('prod', 'otel', '${table}_local', ${SHARDING_KEYS[table]})`,
      );
      expect(local, table).toBeGreaterThanOrEqual(0);
      expect(statements[local], table).toMatch(/\) ENGINE = Replicated\w*MergeTree\('\/clickhouse\/tables\/\{shard\}\/\{database\}\/\{table\}', '\{replica\}'/);
      // On every node the local table exists before the Distributed table copies its columns.
      expect(distributed, table).toBeGreaterThan(local);
    }
    // No plain-named table holds rows: every query and insert in Sluice goes through the Distributed one.
    expect(statements.filter((sql) => /^CREATE TABLE IF NOT EXISTS `otel`\.`\w+(?<!_local)(?<!_swap)` ON CLUSTER `prod` \(/.test(sql))).toEqual([]);
    // The view runs on each node, from the spans stored there into the lookup stored there.
    const view = statements.filter((sql) => sql.startsWith('CREATE MATERIALIZED VIEW'));
    expect(new Set(view).size).toBe(1);
    expect(view[0]).toMatch(/^CREATE MATERIALIZED VIEW IF NOT EXISTS `otel`\.`otel_traces_trace_id_ts_mv` ON CLUSTER `prod` TO `otel`\.`otel_traces_trace_id_ts_local`\n[^]*\nFROM `otel`\.`otel_traces_local`\n/);
    // The ledger is read through its Distributed table, and a version recorded is stored before migrate goes on.
    expect(statements).toContain('SELECT version FROM `otel`.`sluice_schema_migrations`');
    expect(statements.filter((sql) => sql.startsWith('INSERT'))).toEqual(
      MIGRATIONS.map((m) => `INSERT INTO \`otel\`.\`sluice_schema_migrations\` (version, name) SETTINGS insert_distributed_sync = 1 VALUES (${m.version}, '${m.name}')`),
    );
  });

  it('without distributed mode sends exactly what it did before: no _local table, no Distributed one, no Distributed setting', async () => {
    for (const [name, options] of Object.entries(COMBINATIONS)) {
      if (options.distributed) continue;
      expect((await sent(options, true)).join('\n'), name).not.toMatch(/_local`|Distributed|insert_distributed_sync/);
    }
  });

  it('refuses options that would make bad SQL, naming each problem', () => {
    expect(() => validateSchemaOptions({ distributed: true })).toThrow('invalid schema options: distributed: needs a cluster (the Distributed tables name it)');
    const bad = { cluster: 'prod; DROP', ttlDays: { otel_traces: 0, otel_logs: 1.5, otel_spans: 3 } } as SchemaOptions;
    expect(() => validateSchemaOptions(bad)).toThrow(
      'invalid schema options: cluster: must be a cluster name (letters, digits, _ . - and {macros}); ' +
        'ttlDays.otel_traces: must be a whole number of days >= 1; ttlDays.otel_logs: must be a whole number of days >= 1; ' +
        'ttlDays.otel_spans: not a Sluice table',
    );
    expect(() => validateSchemaOptions({ cluster: '{cluster}', ttlDays: { otel_logs: 90 } })).not.toThrow();
  });

  it('creates the TTL tables for real, and the TTL drops expired rows', async () => {
    await migrate(runner, 'telemetry_ttl', TTL);
    const ttl = new Map(rows("SELECT name, create_table_query FROM system.tables WHERE database = 'telemetry_ttl'").map((t) => [t.name, t.create_table_query]));
    expect(ttl.get('otel_logs')).toContain('TTL toDateTime(Timestamp) + toIntervalDay(3)');
    expect(ttl.get('otel_metrics_gauge')).toContain('TTL TimeUnix + toIntervalDay(30)');
    expect(ttl.get('otel_metrics_sum')).not.toMatch(/\bTTL\b/);
    session.query("INSERT INTO telemetry_ttl.otel_logs (SourceId, Timestamp, Body) VALUES ('s', now() - INTERVAL 10 DAY, 'expired'), ('s', now(), 'fresh')");
    session.query("INSERT INTO telemetry_ttl.otel_traces (SourceId, Timestamp, TraceId) VALUES ('s', now() - INTERVAL 10 DAY, 'expired'), ('s', now(), 'fresh')");
    for (const table of ['otel_logs', 'otel_traces', 'otel_traces_trace_id_ts']) session.query(`OPTIMIZE TABLE telemetry_ttl.${table} FINAL`);
    expect(rows('SELECT Body FROM telemetry_ttl.otel_logs')).toEqual([{ Body: 'fresh' }]);
    expect(rows('SELECT TraceId FROM telemetry_ttl.otel_traces')).toEqual([{ TraceId: 'fresh' }]);
    expect(rows('SELECT TraceId FROM telemetry_ttl.otel_traces_trace_id_ts')).toEqual([{ TraceId: 'fresh' }]);
  });
});

describe('migration 5: the trace id lookup on AggregatingMergeTree', () => {
  const BEFORE = MIGRATIONS.filter((m) => m.version < 5);
  /** Up to this migration: what later ones add is theirs to test. */
  const THROUGH = MIGRATIONS.filter((m) => m.version <= 5);
  /** Each trace's first and last span, as the exporter's lookup reads them (a trace's rows merge within a week's partition). */
  const lookup = (db: string) => rows(
    `SELECT SourceId, TraceId, toString(min(Start)) AS Start, toString(max(End)) AS End FROM ${db}.otel_traces_trace_id_ts GROUP BY SourceId, TraceId ORDER BY SourceId, TraceId`,
  );
  const tables = (db: string) => new Map<string, string>(rows(`SELECT name, engine FROM system.tables WHERE database = '${db}'`).map((t) => [t.name, t.engine]));

  /** A database as Sluice left it before migration 5: spans in three inserts, five lookup rows, three for trace a in s1. */
  async function before(db: string): Promise<void> {
    await migrate(runner, db, {}, BEFORE);
    expect(tables(db).get('otel_traces_trace_id_ts')).toBe('MergeTree');
    session.query(`INSERT INTO ${db}.otel_traces (SourceId, Timestamp, TraceId) VALUES ('s1', '2026-08-03 10:00:00', 'a'), ('s1', '2026-08-03 10:00:05', 'a'), ('s2', '2026-08-03 09:00:00', 'a')`);
    session.query(`INSERT INTO ${db}.otel_traces (SourceId, Timestamp, TraceId) VALUES ('s1', '2026-08-03 10:01:00', 'a'), ('s1', '2026-08-04 08:00:00', 'b')`);
    // Another week: another partition of the lookup.
    session.query(`INSERT INTO ${db}.otel_traces (SourceId, Timestamp, TraceId) VALUES ('s1', '2026-08-11 00:00:00', 'a')`);
    expect(rows(`SELECT count() AS n FROM ${db}.otel_traces_trace_id_ts`)[0].n).toBe(5);
  }

  /** What before() stored, per source and trace. */
  const MERGED = [
    { SourceId: 's1', TraceId: 'a', Start: '2026-08-03 10:00:00', End: '2026-08-11 00:00:00' },
    { SourceId: 's1', TraceId: 'b', Start: '2026-08-04 08:00:00', End: '2026-08-04 08:00:00' },
    { SourceId: 's2', TraceId: 'a', Start: '2026-08-03 09:00:00', End: '2026-08-03 09:00:00' },
  ];

  function expectConverted(db: string): void {
    const now = tables(db);
    expect(now.get('otel_traces_trace_id_ts')).toBe('AggregatingMergeTree');
    expect(now.has('otel_traces_trace_id_ts_swap')).toBe(false);
    const [table] = rows(`SELECT sorting_key, partition_key FROM system.tables WHERE database = '${db}' AND name = 'otel_traces_trace_id_ts'`);
    expect(table).toEqual({ sorting_key: 'SourceId, TraceId', partition_key: 'toStartOfWeek(Start)' });
    expect(lookup(db)).toEqual(MERGED);
    // Merged: one row per source, trace and week (s1's trace a spans two weeks), where the MergeTree kept one per insert.
    session.query(`OPTIMIZE TABLE ${db}.otel_traces_trace_id_ts FINAL`);
    expect(rows(`SELECT count() AS n FROM ${db}.otel_traces_trace_id_ts`)[0].n).toBe(4);
    expect(lookup(db)).toEqual(MERGED);
  }

  it('converts the MergeTree of before, keeping its rows, and the view fills the new table', async () => {
    await before('lookup_a');
    const report = await migrate(runner, 'lookup_a', {}, THROUGH);
    expect(report.applied.map((m) => m.version)).toEqual([5]);
    expectConverted('lookup_a');
    session.query("INSERT INTO lookup_a.otel_traces (SourceId, Timestamp, TraceId) VALUES ('s2', '2026-08-03 09:30:00', 'a')");
    session.query('OPTIMIZE TABLE lookup_a.otel_traces_trace_id_ts FINAL');
    expect(lookup('lookup_a')[2]).toEqual({ ...MERGED[2], End: '2026-08-03 09:30:00' });
    expect(rows('SELECT count() AS n FROM lookup_a.otel_traces_trace_id_ts')[0].n).toBe(4);
  });

  // Each case stops the migration after its first `steps` statements, as a crash would.
  for (const [steps, after] of [[1, 'the new table is created'], [2, 'the swap'], [3, 'the old rows are attached']] as const) {
    it(`finishes a conversion interrupted after ${after}`, async () => {
      const db = `lookup_resume_${steps}`;
      await before(db);
      for (const sql of TRACE_ID_TS_MIGRATION.statements(db, {}, tables(db)).slice(0, steps)) session.query(sql);
      const report = await migrate(runner, db, {}, THROUGH);
      expect(report.applied.map((m) => m.version)).toEqual([5]);
      expectConverted(db);
    });
  }

  it('does not record a conversion that another migrate swapped back, and the next run finishes it', async () => {
    await before('lookup_race');
    const swapBack = 'EXCHANGE TABLES `lookup_race`.`otel_traces_trace_id_ts` AND `lookup_race`.`otel_traces_trace_id_ts_swap`';
    // A second migrate that read the same state swaps right after this one.
    const racing: SqlRunner = {
      async query(sql, format) {
        const output = await runner.query(sql, format);
        if (sql === swapBack) await runner.query(swapBack);
        return output;
      },
    };
    await expect(migrate(racing, 'lookup_race', {}, THROUGH)).rejects.toThrow(
      'migration 5 (otel_traces_trace_id_ts on AggregatingMergeTree) is not complete: otel_traces_trace_id_ts is MergeTree; was another migrate running? Run it again',
    );
    expect(rows('SELECT version FROM lookup_race.sluice_schema_migrations').map((r) => r.version)).not.toContain(5);
    expect((await migrate(runner, 'lookup_race', {}, THROUGH)).applied.map((m) => m.version)).toEqual([5]);
    expectConverted('lookup_race');
  });
});

describe('migration 6: ingest_counts', () => {
  it('adds the table to a database of before, partitioned by month, sorted by source, summing Requests and Items', async () => {
    await migrate(runner, 'counts_a', {}, MIGRATIONS.filter((m) => m.version < 6));
    const report = await migrate(runner, 'counts_a', { ttlDays: { ingest_counts: 30 } });
    expect(report.applied.map((m) => m.version)).toEqual([6]);
    const [table] = rows("SELECT engine, sorting_key, partition_key, create_table_query FROM system.tables WHERE database = 'counts_a' AND name = 'ingest_counts'");
    expect(table).toMatchObject({ engine: 'SummingMergeTree', sorting_key: 'SourceId, Signal, Outcome, Reason, Timestamp', partition_key: 'toYYYYMM(Timestamp)' });
    expect(table.create_table_query).toContain('TTL Timestamp + toIntervalDay(30)');
    const types = Object.fromEntries(rows("SELECT name, type FROM system.columns WHERE database = 'counts_a' AND table = 'ingest_counts'").map((c) => [c.name, c.type]));
    expect(types).toEqual({
      SourceId: 'LowCardinality(String)', Timestamp: 'DateTime', Signal: 'LowCardinality(String)', Outcome: 'LowCardinality(String)',
      Reason: 'LowCardinality(String)', Requests: 'UInt64', Items: 'UInt64',
    });
  });
});

describe('distributed mode, created for real (chDB has no Keeper and no cluster to reach)', () => {
  const SHARDED = { cluster: 'prod', distributed: true };
  /**
   * What ON CLUSTER runs on each node, run on this one: the statements without the clause. Its
   * shards cannot be reached, so the ledger is read and written in its local table, as on a
   * cluster of one shard.
   */
  const oneNode: SqlRunner = {
    query: async (sql, format = 'CSV') => session.query(
      sql.replaceAll(' ON CLUSTER `prod`', '').replace(/^(SELECT version FROM|INSERT INTO) (`\w+`\.`sluice_schema_migrations)`( SETTINGS insert_distributed_sync = 1)?/, '$1 $2_local`'),
      format,
    ),
  };
  const tables = (db: string) => new Map<string, { engine: string; engine_full: string }>(
    rows(`SELECT name, engine, engine_full FROM system.tables WHERE database = '${db}'`).map((t) => [t.name, t]),
  );

  it('creates every local table and a Distributed table over it whose sharding key fits its columns, once', async () => {
    const first = await migrate(oneNode, 'sharded', SHARDED);
    expect(first.applied.map((m) => m.version)).toEqual(MIGRATIONS.map((m) => m.version));
    expect((await migrate(oneNode, 'sharded', SHARDED)).applied).toEqual([]);
    const created = tables('sharded');
    for (const table of Object.keys(SHARDING_KEYS) as ShardedTable[]) {
      expect(created.get(`${table}_local`)?.engine, table).toMatch(/MergeTree$/);
      // ClickHouse checked the key when it made the table: an integer, of the local table's columns.
      expect(created.get(table)?.engine_full, table).toBe(`Distributed('prod', 'sharded', '${table}_local', ${SHARDING_KEYS[table]})`);
      const columns = (t: string) => rows(`SELECT name, type FROM system.columns WHERE database = 'sharded' AND table = '${t}' ORDER BY position`);
      expect(columns(table), table).toEqual(columns(`${table}_local`));
    }
    expect(created.get('otel_traces_trace_id_ts_local')?.engine).toBe('AggregatingMergeTree');
    expect([...created.keys()].filter((name) => !name.endsWith('_local') && created.get(name)!.engine !== 'Distributed')).toEqual(['otel_traces_trace_id_ts_mv']);
  });

  it('fills the local lookup from the local spans', () => {
    session.query("INSERT INTO sharded.otel_traces_local (SourceId, Timestamp, TraceId) VALUES ('s', '2026-08-03 10:00:00', 'a'), ('s', '2026-08-03 10:00:07', 'a')");
    expect(rows('SELECT SourceId, TraceId, toString(min(Start)) AS Start, toString(max(End)) AS End FROM sharded.otel_traces_trace_id_ts_local GROUP BY SourceId, TraceId'))
      .toEqual([{ SourceId: 's', TraceId: 'a', Start: '2026-08-03 10:00:00', End: '2026-08-03 10:00:07' }]);
  });

  it('refuses to shard a database made without distributed mode, and the reverse, before creating anything', async () => {
    await migrate(runner, 'plain');
    const before = [...tables('plain').keys()];
    await expect(migrate(oneNode, 'plain', SHARDED)).rejects.toThrow(
      'the database plain was made without distributed mode (otel_traces, otel_traces_trace_id_ts, otel_logs, otel_metrics_gauge, otel_metrics_sum, ' +
        'otel_metrics_histogram, otel_metrics_exp_histogram, otel_metrics_summary, agent_logs, agent_metrics, agent_heartbeats, ingest_counts, deploy_markers, ' +
        'relay_submissions, relay_delivery_jobs, relay_delivery_attempts, sluice_schema_migrations not Distributed): sharding it is not a migration; ' +
        'migrate a new database (SLUICE_CLICKHOUSE_DATABASE) and move the rows',
    );
    expect([...tables('plain').keys()]).toEqual(before);
    await expect(migrate(runner, 'sharded')).rejects.toThrow(/^the database sharded was made in distributed mode \(otel_traces, .*\): set SLUICE_CLICKHOUSE_DISTRIBUTED=true$/);
    expect(layoutProblem(new Map([['otel_traces', 'Distributed']]), SHARDED)).toBeUndefined();
  });
});
