/**
 * A reader of ClickHouse's Native format as clickhouse-go reads it over HTTP, for tests: the
 * Go client itself needs a Go toolchain newer than this machine has. Written from
 * clickhouse-go v2 (github.com/ClickHouse/clickhouse-go, conn_http.go: `default_format=Native`,
 * `client_protocol_version` = its DBMS_TCP_PROTOCOL_VERSION 54460; lib/proto/block.go
 * Block.Decode: a BlockInfo when the revision is > 0, a serialization-kind byte per column from
 * 54454, which must be 0; lib/column/*.go for the column data), and independent of
 * query/native.ts: it decodes values, so a column read at the wrong place shows as wrong values.
 *
 * Values come out as JSONCompactEachRow writes them with 64-bit integers quoted and tuples as
 * arrays (maps as objects, DateTime64 as text), so tests compare the two outputs of one query.
 */
export interface NativeColumn {
  name: string;
  type: string;
  values: unknown[];
}

/** The blocks of `bytes`, read as a client of `revision`. */
export function decodeNative(bytes: Uint8Array, revision: number): NativeColumn[][] {
  const reader = new Reader(bytes);
  const blocks: NativeColumn[][] = [];
  while (reader.position < bytes.length) {
    if (revision > 0) readBlockInfo(reader);
    const columnCount = reader.varuint();
    const rows = reader.varuint();
    const columns: NativeColumn[] = [];
    for (let i = 0; i < columnCount; i++) {
      const name = reader.string();
      const type = reader.string();
      if (revision >= 54454 && reader.byte() !== 0) throw new Error(`column ${name}: custom serialization`);
      const values = rows === 0 ? [] : (readPrefix(reader, type), readColumn(reader, type, rows));
      columns.push({ name, type, values });
    }
    blocks.push(columns);
  }
  return blocks;
}

/** The rows of every block, as arrays of values (JSONCompactEachRow's shape). */
export function nativeRows(blocks: NativeColumn[][]): unknown[][] {
  return blocks.flatMap((columns) => (columns[0]?.values ?? []).map((_, row) => columns.map((column) => column.values[row])));
}

/** clickhouse-go decodeBlockInfo: field 1, is_overflows; field 2, bucket_num; 0. */
function readBlockInfo(reader: Reader): void {
  if (reader.varuint() !== 1) throw new Error('BlockInfo: field 1 expected');
  reader.byte();
  if (reader.varuint() !== 2) throw new Error('BlockInfo: field 2 expected');
  reader.bytes(4);
  if (reader.varuint() !== 0) throw new Error('BlockInfo: end expected');
}

function readPrefix(reader: Reader, type: string): void {
  const { name, args } = split(type);
  if (name === 'LowCardinality') {
    if (reader.uint64() !== 1n) throw new Error('LowCardinality: keys version 1 expected');
  } else if (['Nullable', 'Array', 'Map'].includes(name)) {
    for (const arg of args) readPrefix(reader, arg);
  } else if (name === 'Tuple') {
    for (const arg of args) readPrefix(reader, tupleElement(arg));
  }
}

function readColumn(reader: Reader, type: string, rows: number): unknown[] {
  const { name, args } = split(type);
  const each = (read: () => unknown) => Array.from({ length: rows }, read);
  switch (name) {
    case 'UInt8': return each(() => reader.byte());
    case 'Bool': return each(() => reader.byte() === 1);
    case 'UInt16': return each(() => reader.view(2).getUint16(0, true));
    case 'UInt32': return each(() => reader.view(4).getUint32(0, true));
    case 'UInt64': return each(() => String(reader.uint64()));
    case 'Int8': return each(() => reader.view(1).getInt8(0));
    case 'Int32': return each(() => reader.view(4).getInt32(0, true));
    case 'Int64': return each(() => String(reader.view(8).getBigInt64(0, true)));
    case 'Float64': return each(() => reader.view(8).getFloat64(0, true));
    case 'DateTime': return each(() => dateTime64(BigInt(reader.view(4).getUint32(0, true)), ['0', ...args]));
    case 'DateTime64': return each(() => dateTime64(reader.view(8).getBigInt64(0, true), args));
    case 'Decimal': { // Decimal(P, S) up to P = 18: an Int64 of units of 10^-S
      if (Number(args[0]) > 18) throw new Error('test decoder: Decimal up to 18 digits');
      return each(() => Number(reader.view(8).getBigInt64(0, true)) / 10 ** Number(args[1]));
    }
    case 'String': return each(() => reader.string());
    case 'FixedString': return each(() => Buffer.from(reader.bytes(Number(args[0]))).toString('latin1'));
    case 'Enum8': {
      const names = new Map(args.map((arg) => /^'(.*)' = (-?\d+)$/.exec(arg)!).map((m) => [Number(m[2]), m[1]!]));
      return each(() => names.get(reader.view(1).getInt8(0)));
    }
    case 'Nullable': {
      const isNull = Array.from(reader.bytes(rows));
      const values = readColumn(reader, args[0]!, rows);
      return values.map((value, i) => (isNull[i] ? null : value));
    }
    case 'Array':
    case 'Map': {
      const offsets = Array.from({ length: rows }, () => Number(reader.uint64()));
      const total = offsets[rows - 1] ?? 0;
      const parts = args.map((arg) => readColumn(reader, arg, total));
      return offsets.map((end, i) => {
        const start = i === 0 ? 0 : offsets[i - 1]!;
        if (name === 'Array') return parts[0]!.slice(start, end);
        return Object.fromEntries(parts[0]!.slice(start, end).map((key, j) => [key, parts[1]![start + j]]));
      });
    }
    case 'Tuple': {
      const elements = args.map((arg) => readColumn(reader, tupleElement(arg), rows));
      return Array.from({ length: rows }, (_, row) => elements.map((element) => element[row]));
    }
    case 'LowCardinality': return readLowCardinality(reader, args[0]!, rows);
  }
  throw new Error(`test decoder: no reader for ${type}`);
}

/** A DateTime64 in UTC as ClickHouse writes it in text: `2024-05-01 12:00:00.123456789` (without a zone of its own, the test's session_timezone=UTC). */
function dateTime64(ticks: bigint, args: string[]): string {
  if (args[1] !== undefined && args[1] !== "'UTC'") throw new Error('test decoder: DateTime64 in UTC only');
  const precision = Number(args[0]);
  const scale = 10n ** BigInt(precision);
  const seconds = ticks / scale;
  const text = new Date(Number(seconds) * 1000).toISOString().slice(0, 19).replace('T', ' ');
  return precision === 0 ? text : `${text}.${String(ticks % scale).padStart(precision, '0')}`;
}

/** clickhouse-go lib/column/lowcardinality.go: nothing for no rows, else flags, keys (the dictionary), then the indexes. */
function readLowCardinality(reader: Reader, inner: string, rows: number): unknown[] {
  if (rows === 0) return [];
  const nullable = split(inner).name === 'Nullable';
  const flags = Number(reader.uint64());
  const keyWidth = 2 ** (flags & 0xff);
  const keyCount = Number(reader.uint64());
  const keys = readColumn(reader, nullable ? split(inner).args[0]! : inner, keyCount);
  if (Number(reader.uint64()) !== rows) throw new Error('LowCardinality: one granule expected');
  return Array.from({ length: rows }, () => {
    const view = reader.view(keyWidth);
    const index = keyWidth === 1 ? view.getUint8(0) : keyWidth === 2 ? view.getUint16(0, true) : view.getUint32(0, true);
    // With Nullable inside, key 0 stands for NULL.
    return nullable && index === 0 ? null : keys[index];
  });
}

function tupleElement(element: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]* (.+)$/s.exec(element)?.[1] ?? element;
}

function split(type: string): { name: string; args: string[] } {
  const open = type.indexOf('(');
  if (open < 0) return { name: type, args: [] };
  const args: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = open + 1;
  for (let i = start; i < type.length - 1; i++) {
    const c = type[i];
    if (c === "'") quoted = !quoted;
    else if (!quoted && c === '(') depth++;
    else if (!quoted && c === ')') depth--;
    else if (!quoted && c === ',' && depth === 0) {
      args.push(type.slice(start, i).trim());
      start = i + 1;
    }
  }
  args.push(type.slice(start, type.length - 1).trim());
  return { name: type.slice(0, open), args };
}

class Reader {
  position = 0;
  constructor(private readonly data: Uint8Array) {}

  bytes(n: number): Uint8Array {
    if (this.position + n > this.data.length) throw new Error('Native: unexpected end');
    const out = this.data.subarray(this.position, this.position + n);
    this.position += n;
    return out;
  }

  byte(): number {
    return this.bytes(1)[0]!;
  }

  view(n: number): DataView {
    const b = this.bytes(n);
    return new DataView(b.buffer, b.byteOffset, n);
  }

  uint64(): bigint {
    return this.view(8).getBigUint64(0, true);
  }

  varuint(): number {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      const b = this.byte();
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
    }
  }

  string(): string {
    return Buffer.from(this.bytes(this.varuint())).toString('utf8');
  }
}
