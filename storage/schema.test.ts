import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Session } from 'chdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, type SqlRunner } from './migrate.ts';
import { MIGRATIONS, TABLE_COLUMNS } from './schema.ts';

let dir: string;
let session: Session;
let runner: SqlRunner;
const rows = (sql: string) => session.query(sql, 'JSONEachRow').split('\n').filter(Boolean).map((line) => JSON.parse(line));

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sluice-schema-'));
  const { Session } = await import('chdb');
  session = new Session(dir);
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
      'otel_logs', 'otel_metrics_exp_histogram', 'otel_metrics_gauge', 'otel_metrics_histogram', 'otel_metrics_sum',
      'otel_metrics_summary', 'otel_traces', 'otel_traces_trace_id_ts', 'otel_traces_trace_id_ts_mv', 'sluice_schema_migrations',
    ]);
  });

  it('puts SourceId first in every sort key', async () => {
    await migrate(runner, 'telemetry_b');
    for (const { name, sorting_key, primary_key } of rows("SELECT name, sorting_key, primary_key FROM system.tables WHERE database = 'telemetry_b' AND startsWith(name, 'otel_') AND engine = 'MergeTree'")) {
      expect(sorting_key, name).toMatch(/^SourceId, /);
      expect(primary_key, name).toMatch(/^SourceId(, |$)/);
    }
  });

  it('has every column the transcoder writes, with the exporter types', async () => {
    await migrate(runner, 'telemetry_c');
    const types = new Map<string, string>();
    for (const { table, name, type } of rows("SELECT table, name, type FROM system.columns WHERE database = 'telemetry_c'")) types.set(`${table}.${name}`, type);
    for (const [table, columns] of Object.entries(TABLE_COLUMNS)) {
      for (const column of columns) expect(types.has(`${table}.${column}`), `${table}.${column}`).toBe(true);
      expect(types.get(`${table}.SourceId`)).toBe('LowCardinality(String)');
    }
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
    for (const { name, partition_key, create_table_query } of rows("SELECT name, partition_key, create_table_query FROM system.tables WHERE database = 'telemetry_d' AND engine = 'MergeTree' AND startsWith(name, 'otel_')")) {
      expect(partition_key, name).toMatch(/^(toDate|toStartOfWeek)\(/);
      expect(create_table_query, name).not.toMatch(/\bTTL\b/);
    }
  });
});
