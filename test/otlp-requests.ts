/**
 * Test support for the transcoder tests: OTLP requests encoded with protobufjs from our
 * proto/ files, and a real chDB session with the schema migrated, into which transcoded
 * RowBinary is inserted the way storage/chdb.ts does it (through a file). libchdb binds one
 * data directory per process, so each test file opens one ChdbTables.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import type { Session } from 'chdb';
import { migrate } from '../storage/migrate.ts';
import { quoteIdentifier, quoteString } from '../storage/storage.ts';
import type { Signal, TranscodeResult } from '../pipeline/otlp/index.ts';

const PROTO_DIR = fileURLToPath(new URL('../proto/', import.meta.url));
const REQUEST_TYPES: Record<Signal, string> = {
  traces: 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest',
  logs: 'opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest',
  metrics: 'opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest',
};

let root: protobuf.Root | undefined;

/** The protobufjs type of a signal's export request, from our proto/ files. */
export function requestType(signal: Signal): protobuf.Type {
  if (!root) {
    root = new protobuf.Root();
    root.resolvePath = (_origin, target) => join(PROTO_DIR, target);
    root.loadSync(['trace', 'logs', 'metrics'].map((s) => `opentelemetry/proto/collector/${s}/v1/${s}_service.proto`));
    root.resolveAll();
  }
  return root.lookupType(REQUEST_TYPES[signal]);
}

/** Encodes a request given as a protobufjs object (camelCase keys, Buffers for bytes). */
export function encodeRequest(signal: Signal, request: object): Uint8Array {
  const type = requestType(signal);
  // Requests as deep as the transcoder takes (attribute values 100 levels: 3 messages each),
  // without changing protobufjs's limit for the code under test.
  const limit = protobuf.util.recursionLimit;
  protobuf.util.recursionLimit = Math.max(limit, 400);
  try {
    return type.encode(type.fromObject(request)).finish();
  } finally {
    protobuf.util.recursionLimit = limit;
  }
}

/** Shorthand for an attribute list: strings, integers (number or bigint), booleans. */
export function attrs(values: Record<string, string | number | bigint | boolean>): object[] {
  return Object.entries(values).map(([key, v]) => ({
    key,
    value: typeof v === 'string' ? { stringValue: v }
      : typeof v === 'boolean' ? { boolValue: v }
      : typeof v === 'bigint' || Number.isInteger(v) ? { intValue: String(v) }
      : { doubleValue: v },
  }));
}

export type Row = Record<string, unknown>;

/** A chDB session in a temp directory with the Sluice schema in database `otel`. */
export class ChdbTables {
  private constructor(private readonly session: Session, private readonly dir: string) {}

  static async open(): Promise<ChdbTables> {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-otlp-test-'));
    const { Session } = await import('chdb');
    const tables = new ChdbTables(new Session(join(dir, 'data')), dir);
    await migrate({ query: async (sql, format = 'CSV') => tables.session.query(sql, format) }, 'otel');
    return tables;
  }

  /** Inserts every table of a transcode result. */
  insert(result: TranscodeResult): void {
    for (const { table, columns, data } of result.tables) {
      const file = join(this.dir, `${table}-${Date.now()}-${Math.random()}.bin`);
      writeFileSync(file, data);
      const list = columns.map(quoteIdentifier).join(', ');
      // A token of its own, as storage does: the tables' dedup window would drop a block whose bytes match an earlier one.
      const settings = `SETTINGS insert_deduplication_token = ${quoteString(`unique:${randomUUID()}`)}`;
      this.session.query(`INSERT INTO otel.${quoteIdentifier(table)} (${list}) FROM INFILE ${quoteString(file)} ${settings} FORMAT RowBinary`, 'CSV');
      rmSync(file);
    }
  }

  /** Runs a SELECT and returns its rows. */
  select(sql: string): Row[] {
    return this.session
      .query(sql, 'JSONEachRow')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Row);
  }

  /** Empties the data tables between tests. */
  truncateAll(): void {
    for (const { name } of this.select("SELECT name FROM system.tables WHERE database = 'otel' AND endsWith(engine, 'MergeTree') AND startsWith(name, 'otel_')")) {
      this.session.query(`TRUNCATE TABLE otel.${quoteIdentifier(String(name))}`, 'CSV');
    }
  }

  close(): void {
    this.session.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
