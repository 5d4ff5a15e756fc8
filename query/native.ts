/**
 * ClickHouse's Native format for a client of a given protocol revision.
 *
 * Over HTTP, ClickHouse writes Native in the layout of the revision the client names in
 * client_protocol_version. clickhouse-go, which Grafana's ClickHouse data source uses, asks
 * for Native (default_format=Native) and names its revision (54460): it reads a BlockInfo
 * before each block and, from revision 54454, a serialization-kind byte after each column's
 * type (clickhouse-go lib/proto/block.go, Block.Decode). chDB takes no
 * client_protocol_version and writes the plain layout of revision 0, which ClickHouse also
 * sends a client that names none:
 *
 *   block  := columns:varuint rows:varuint column*
 *   column := name:string type:string data     (no data when rows = 0)
 *
 * This adds what the revision wants. Where a column's data ends is only known from its type,
 * so the data is walked, type by type (src/DataTypes/Serializations in ClickHouse); the bytes
 * are copied as chDB wrote them. Types whose Native data this walk does not know (Dynamic,
 * Variant, JSON, AggregateFunction...) are refused with a ClickHouse error rather than sent
 * wrong.
 */
import { ClickHouseException } from './errors.ts';

/** From this revision on, each column carries a serialization-kind byte (0: the default one). */
export const REVISION_WITH_CUSTOM_SERIALIZATION = 54454;

/** BlockInfo as ClickHouse writes it: field 1 is_overflows = false, field 2 bucket_num = -1, end. */
const BLOCK_INFO = Uint8Array.of(1, 0, 2, 0xff, 0xff, 0xff, 0xff, 0);
const DEFAULT_SERIALIZATION = Uint8Array.of(0);

const FIXED_WIDTH = new Map<string, number>([
  ...['UInt8', 'Int8', 'Bool', 'Enum8'].map((t) => [t, 1] as const),
  ...['UInt16', 'Int16', 'Date', 'Enum16', 'BFloat16'].map((t) => [t, 2] as const),
  ...['UInt32', 'Int32', 'Float32', 'DateTime', 'Date32', 'IPv4', 'Time', 'Decimal32'].map((t) => [t, 4] as const),
  ...['UInt64', 'Int64', 'Float64', 'DateTime64', 'Time64', 'Decimal64'].map((t) => [t, 8] as const),
  ...['UInt128', 'Int128', 'UUID', 'IPv6', 'Decimal128'].map((t) => [t, 16] as const),
  ...['UInt256', 'Int256', 'Decimal256'].map((t) => [t, 32] as const),
]);

/** Geo types are names for nested ones. */
const ALIASES = new Map<string, string>([
  ['Point', 'Tuple(Float64, Float64)'],
  ['Ring', 'Array(Point)'],
  ['LineString', 'Array(Point)'],
  ['MultiLineString', 'Array(LineString)'],
  ['Polygon', 'Array(Ring)'],
  ['MultiPolygon', 'Array(Polygon)'],
]);

/** LowCardinality index flags (SerializationLowCardinality.cpp). */
const NEED_GLOBAL_DICTIONARY = 1 << 8;
const HAS_ADDITIONAL_KEYS = 1 << 9;

/** chDB's Native output rewritten for a client of `revision` (> 0), in one buffer. */
export function nativeForRevision(input: Uint8Array, revision: number): Buffer {
  return Buffer.concat(nativeParts(input, revision));
}

/**
 * The same, as the parts to send one after the other: views of `input` and the few bytes
 * added between them. Nothing is copied: a copy of a 90 MiB result on the event loop (fresh
 * pages, faulted in one by one) held it for about a second on a 2-core VM.
 */
export function nativeParts(input: Uint8Array, revision: number): Uint8Array[] {
  const reader = new NativeReader(input);
  const parts: Uint8Array[] = [];
  while (!reader.done) {
    parts.push(BLOCK_INFO);
    const headerStart = reader.position;
    const columns = reader.varuint();
    const rows = reader.varuint();
    parts.push(reader.slice(headerStart));
    for (let i = 0; i < columns; i++) {
      const columnStart = reader.position;
      const name = reader.string();
      const type = reader.string();
      parts.push(reader.slice(columnStart));
      if (revision >= REVISION_WITH_CUSTOM_SERIALIZATION) parts.push(DEFAULT_SERIALIZATION);
      if (rows === 0) continue;
      const dataStart = reader.position;
      const kind = parseType(type, name, revision);
      skipPrefix(reader, kind);
      skipData(reader, kind, rows);
      parts.push(reader.slice(dataStart));
    }
  }
  return parts;
}

interface TypeNode {
  name: string;
  args: TypeNode[];
  /** The arguments as written (FixedString's width, Decimal's precision). */
  raw: string[];
}

function skipPrefix(reader: NativeReader, type: TypeNode): void {
  switch (type.name) {
    case 'LowCardinality': reader.skip(8); return; // the keys' serialization version
    case 'Nullable': case 'Array': case 'Map': case 'Tuple': case 'SimpleAggregateFunction':
      for (const arg of type.args) skipPrefix(reader, arg);
  }
}

function skipData(reader: NativeReader, type: TypeNode, rows: number): void {
  const width = fixedWidth(type);
  if (width !== undefined) return reader.skip(width * rows);
  switch (type.name) {
    case 'String':
      for (let i = 0; i < rows; i++) reader.skip(reader.varuint());
      return;
    case 'Nullable':
      reader.skip(rows); // the null map
      return skipData(reader, type.args[0]!, rows);
    case 'Array':
    case 'Map': {
      const elements = rows === 0 ? 0 : lastOffset(reader, rows);
      for (const arg of type.args) skipData(reader, arg, elements);
      return;
    }
    case 'Tuple':
      for (const arg of type.args) skipData(reader, arg, rows);
      return;
    case 'SimpleAggregateFunction':
      return skipData(reader, type.args[0]!, rows);
    case 'LowCardinality':
      return skipLowCardinality(reader, type.args[0]!, rows);
  }
  throw new Error(`no walk for ${type.name}`); // parseType lets no other type through
}

/** Array offsets: one UInt64 per row, cumulative; the last is the number of elements. */
function lastOffset(reader: NativeReader, rows: number): number {
  reader.skip(8 * (rows - 1));
  return reader.uint64();
}

/** Granules of [flags, (keys), index count, indexes] until every row is covered. */
function skipLowCardinality(reader: NativeReader, inner: TypeNode, rows: number): void {
  const dictionary = inner.name === 'Nullable' ? inner.args[0]! : inner;
  for (let done = 0; done < rows;) {
    const flags = reader.uint64();
    if (flags & NEED_GLOBAL_DICTIONARY) throw new Error('a LowCardinality column with a global dictionary');
    if (flags & HAS_ADDITIONAL_KEYS) skipData(reader, dictionary, reader.uint64());
    const indexes = reader.uint64();
    reader.skip(indexes * 2 ** (flags & 0xff));
    done += indexes;
  }
}

function fixedWidth(type: TypeNode): number | undefined {
  if (type.name === 'FixedString') return Number(type.raw[0]);
  if (type.name === 'Nothing') return 1; // written as one byte a row
  if (type.name === 'Decimal') {
    const precision = Number(type.raw[0]);
    return precision <= 9 ? 4 : precision <= 18 ? 8 : precision <= 38 ? 16 : 32;
  }
  if (type.name.startsWith('Interval')) return 8;
  return FIXED_WIDTH.get(type.name);
}

const WALKED = new Set(['String', 'FixedString', 'Nothing', 'Decimal', 'Nullable', 'Array', 'Map', 'Tuple', 'Nested', 'SimpleAggregateFunction', 'LowCardinality']);

/** The type tree of a column type as ClickHouse writes it; refuses types the walk does not know. */
function parseType(text: string, column: string, revision: number): TypeNode {
  const open = text.indexOf('(');
  const name = open < 0 ? text : text.slice(0, open);
  const alias = ALIASES.get(name);
  if (alias && open < 0) return parseType(alias, column, revision);
  if (!WALKED.has(name) && !FIXED_WIDTH.has(name) && !name.startsWith('Interval')) {
    throw ClickHouseException.of('NOT_IMPLEMENTED', `Column ${column} of type ${text} cannot be sent here in the Native format of protocol revision ${revision}; ask for another format (default_format=JSONEachRow, for one)`);
  }
  const raw = open < 0 ? [] : splitArguments(text.slice(open + 1, text.lastIndexOf(')')));
  const nested = (arg: string) => parseType(arg, column, revision);
  switch (name) {
    case 'Nullable': case 'Array': case 'LowCardinality': return { name, args: raw.map(nested), raw };
    case 'Map': return { name, args: raw.map(nested), raw };
    case 'Tuple': return { name, args: raw.map((element) => nested(elementType(element))), raw };
    // Nested(a T, b U) is stored as Array(Tuple(a T, b U)).
    case 'Nested': return { name: 'Array', args: [{ name: 'Tuple', args: raw.map((element) => nested(elementType(element))), raw }], raw };
    case 'SimpleAggregateFunction': return { name, args: [nested(raw[1]!)], raw };
    default: return { name, args: [], raw };
  }
}

/** A tuple element is `Type` or `name Type` (the name maybe in backquotes). */
function elementType(element: string): string {
  return /^(?:`(?:[^`\\]|\\.)*`|[A-Za-z_][A-Za-z0-9_]*) (.+)$/s.exec(element)?.[1] ?? element;
}

/** Splits `a, b(c, d), 'e, f'` at the commas outside parentheses and quotes. */
function splitArguments(text: string): string[] {
  const args: string[] = [];
  let depth = 0;
  let quote = '';
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = '';
    } else if (c === "'" || c === '`' || c === '"') quote = c;
    else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      args.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  args.push(text.slice(start).trim());
  return args;
}

/** Reads chDB's output; running past its end is a bug of the walk, not the client's. */
class NativeReader {
  position = 0;
  private readonly view: DataView;

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get done(): boolean {
    return this.position >= this.bytes.length;
  }

  varuint(): number {
    let value = 0;
    for (let shift = 0; shift < 63; shift += 7) {
      const byte = this.bytes[this.position++];
      if (byte === undefined) throw new Error('Native output ends inside a number');
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    throw new Error('Native output has a number over 9 bytes');
  }

  uint64(): number {
    this.need(8);
    const value = Number(this.view.getBigUint64(this.position, true));
    this.position += 8;
    return value;
  }

  string(): string {
    const length = this.varuint();
    this.need(length);
    const text = Buffer.from(this.bytes.buffer, this.bytes.byteOffset + this.position, length).toString('utf8');
    this.position += length;
    return text;
  }

  skip(bytes: number): void {
    this.need(bytes);
    this.position += bytes;
  }

  /** The bytes from `start` to here (a view, not a copy). */
  slice(start: number): Uint8Array {
    return this.bytes.subarray(start, this.position);
  }

  private need(bytes: number): void {
    if (!Number.isSafeInteger(bytes) || bytes < 0 || this.position + bytes > this.bytes.length) throw new Error('Native output ends inside a column');
  }
}
