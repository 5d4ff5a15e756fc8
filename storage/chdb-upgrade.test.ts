/**
 * A data dir of a Sluice from before migration 5 (the trace id lookup a MergeTree), started by
 * this one: ChdbStorage converts the lookup as it starts, and the exporter's trace lookup query
 * works on it. (Its own file: libchdb opens one data dir per process.)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChdbStorage } from './chdb.ts';
import { migrate } from './migrate.ts';
import { MIGRATIONS } from './schema.ts';
import { queryRows } from './storage.ts';

let dir: string;
let storage: ChdbStorage | undefined;

const TRACE = '391dae938234560b16bb63f51501cb6f';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-upgrade-'));
  const { Session } = await import('chdb');
  const session = new Session(join(dir, 'clickhouse'));
  try {
    await migrate({ query: async (sql, format = 'CSV') => session.query(sql, format) }, 'otel', {}, MIGRATIONS.filter((m) => m.version < 5));
    // What the old start did to every table (ChdbStorage#syncPartsToDisk).
    session.query('ALTER TABLE otel.otel_traces_trace_id_ts MODIFY SETTING fsync_after_insert = 1, fsync_part_directory = 1, min_compressed_bytes_to_fsync_after_merge = 1');
    const span = (source: string, trace: string, span: string, time: string, name: string) =>
      `('${source}', '${time}', '${trace}', '${span}', 'checkout', '${name}', 'SPAN_KIND_SERVER', 1500000)`;
    const insert = (values: string[]) =>
      session.query(`INSERT INTO otel.otel_traces (SourceId, Timestamp, TraceId, SpanId, ServiceName, SpanName, SpanKind, Duration) VALUES ${values.join(', ')}`);
    insert([span('src_a', TRACE, 's1', '2026-08-03 10:00:00.100', 'GET /cart'), span('src_a', 'other', 's2', '2026-08-03 10:00:00.200', 'GET /')]);
    insert([span('src_a', TRACE, 's3', '2026-08-03 10:00:02.900', 'SELECT cart'), span('src_b', TRACE, 's4', '2026-08-03 11:00:00', 'GET /cart')]);
  } finally {
    session.close();
  }
  storage = new ChdbStorage(dir, 'otel');
  await storage.start();
});
afterAll(async () => {
  await storage?.shutdown();
  await rm(dir, { recursive: true, force: true });
});

const rows = <T>(sql: string) => queryRows<T>(storage!, sql);

describe('a data dir from before migration 5', () => {
  it('is converted at start: the lookup is an AggregatingMergeTree whose parts are synced to disk', async () => {
    const [table] = await rows<{ engine: string; create_table_query: string }>(
      "SELECT engine, create_table_query FROM system.tables WHERE database = 'otel' AND name = 'otel_traces_trace_id_ts'",
    );
    expect(table!.engine).toBe('AggregatingMergeTree');
    expect(table!.create_table_query).toContain('min_compressed_bytes_to_fsync_after_merge = 1');
    expect((await rows<{ version: number }>('SELECT version FROM otel.sluice_schema_migrations ORDER BY version')).map((r) => r.version)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(await rows("SELECT name FROM system.tables WHERE database = 'otel' AND name = 'otel_traces_trace_id_ts_swap'")).toEqual([]);
  });

  it("answers the exporter's trace lookup (its README's query), and the per-source one", async () => {
    // exporter/clickhouseexporter/README.md, "Find traces with traceID", with the database named.
    const exporterQuery = (sourceFilter: string) => `
      WITH
          '${TRACE}' as trace_id,
          (SELECT min(Start) FROM otel.otel_traces_trace_id_ts WHERE TraceId = trace_id${sourceFilter}) as start,
          (SELECT max(End) + 1 FROM otel.otel_traces_trace_id_ts WHERE TraceId = trace_id${sourceFilter}) as end
      SELECT SourceId, SpanId, SpanName
      FROM otel.otel_traces
      WHERE TraceId = trace_id${sourceFilter}
        AND Timestamp >= start
        AND Timestamp <= end
      ORDER BY Timestamp`;
    expect(await rows(exporterQuery(''))).toEqual([
      { SourceId: 'src_a', SpanId: 's1', SpanName: 'GET /cart' },
      { SourceId: 'src_a', SpanId: 's3', SpanName: 'SELECT cart' },
      { SourceId: 'src_b', SpanId: 's4', SpanName: 'GET /cart' },
    ]);
    // A source's own trace: SourceId first in both keys, so both reads stay within the source.
    expect(await rows(exporterQuery(" AND SourceId = 'src_a'"))).toEqual([
      { SourceId: 'src_a', SpanId: 's1', SpanName: 'GET /cart' },
      { SourceId: 'src_a', SpanId: 's3', SpanName: 'SELECT cart' },
    ]);
  });

  it('keeps filling the lookup from new spans, one row per trace and week once merged', async () => {
    await storage!.query(
      `INSERT INTO otel.otel_traces (SourceId, Timestamp, TraceId, SpanId) VALUES ('src_a', '2026-08-03 10:00:04', '${TRACE}', 's5')`,
    );
    await storage!.query('OPTIMIZE TABLE otel.otel_traces_trace_id_ts FINAL');
    expect(await rows(`SELECT SourceId, toString(Start) AS Start, toString(End) AS End FROM otel.otel_traces_trace_id_ts WHERE TraceId = '${TRACE}' ORDER BY SourceId`)).toEqual([
      { SourceId: 'src_a', Start: '2026-08-03 10:00:00', End: '2026-08-03 10:00:04' },
      { SourceId: 'src_b', Start: '2026-08-03 11:00:00', End: '2026-08-03 11:00:00' },
    ]);
  });
});
