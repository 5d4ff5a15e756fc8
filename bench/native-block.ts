/**
 * Measuring prototypes, not a path of Sluice's: one ClickHouse Native block made of many
 * requests' rows, which costs chDB's insert 25-45 % less than the same rows in RowBinary read
 * with the table's types, and about what RowBinary read as plain strings costs, as Sluice reads
 * it since 8c02215 (bench/README.md, *chDB by input format*). Two ways, to measure what each costs in JavaScript:
 * nativeBlock() transposes RowBinary rows into columns (LowCardinality columns as dictionaries),
 * touching every byte of every value; joinNativeBlocks() joins requests' own Native blocks (plain
 * types) column by column, as a batch builder would if the transcoder wrote columns. Types:
 * String, UInt64, DateTime64, LowCardinality(String), Array(T), Map(K, V).
 */

/** A column type, parsed from ClickHouse's name for it. */
export type ColumnType =
  | { kind: 'string' }
  | { kind: 'fixed8' }
  | { kind: 'lowCardinality' }
  | { kind: 'array'; element: ColumnType }
  | { kind: 'map'; key: ColumnType; value: ColumnType };

export function parseType(name: string): ColumnType {
  const inner = (prefix: string) => name.slice(prefix.length + 1, -1);
  if (name === 'String') return { kind: 'string' };
  if (name === 'UInt64' || name === 'Int64' || name.startsWith('DateTime64')) return { kind: 'fixed8' };
  if (name === 'LowCardinality(String)') return { kind: 'lowCardinality' };
  if (name.startsWith('Array(')) return { kind: 'array', element: parseType(inner('Array')) };
  if (name.startsWith('Map(')) {
    const [key, value] = splitTopLevel(inner('Map'));
    return { kind: 'map', key: parseType(key!), value: parseType(value!) };
  }
  throw new Error(`native-block: type ${name} not handled`);
}

function splitTopLevel(list: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    if (list[i] === '(') depth++;
    else if (list[i] === ')') depth--;
    else if (list[i] === ',' && depth === 0) {
      parts.push(list.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(list.slice(start).trim());
  return parts;
}

/** An append-only byte buffer. */
class Bytes {
  buffer: Buffer;
  length = 0;

  constructor(capacity = 1 << 16, buffer: Buffer = Buffer.allocUnsafe(capacity)) {
    this.buffer = buffer;
  }

  room(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + bytes));
    this.buffer.copy(next, 0, 0, this.length);
    this.buffer = next;
  }

  copy(from: Uint8Array, start: number, end: number): void {
    this.room(end - start);
    if (end - start > 32) {
      this.buffer.set(from.subarray(start, end), this.length);
      this.length += end - start;
      return;
    }
    // Short values (most of them): a loop costs less than a view and a native call.
    const buffer = this.buffer;
    let at = this.length;
    for (let i = start; i < end; i++) buffer[at++] = from[i]!;
    this.length = at;
  }

  varint(value: number): void {
    this.room(10);
    while (value >= 0x80) {
      this.buffer[this.length++] = (value & 0x7f) | 0x80;
      value = Math.floor(value / 128);
    }
    this.buffer[this.length++] = value;
  }

  u64(value: number): void {
    this.room(8);
    this.buffer.writeUInt32LE(value >>> 0, this.length);
    this.buffer.writeUInt32LE(Math.floor(value / 0x1_0000_0000), this.length + 4);
    this.length += 8;
  }

  view(): Buffer {
    return this.buffer.subarray(0, this.length);
  }
}

/** Reads RowBinary: a position in the current chunk. */
class Reader {
  data: Uint8Array = new Uint8Array(0);
  at = 0;

  varint(): number {
    let value = 0;
    let scale = 1;
    for (;;) {
      const byte = this.data[this.at++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
  }
}

interface ColumnBuilder {
  /** Which class: readValue() dispatches on it, so that its calls stay monomorphic (and inlined). */
  readonly kind: 0 | 1 | 2 | 3;
  /** Reads one value from RowBinary and keeps it. */
  read(reader: Reader): void;
  /** The LowCardinality serialization version prefixes of this column and its parts, in order. */
  prefix(out: Bytes): void;
  /** The column's values in Native. */
  write(out: Bytes): void;
}

class StringColumn implements ColumnBuilder {
  readonly kind = 0;
  private readonly bytes = new Bytes();
  read(reader: Reader): void {
    const start = reader.at;
    const length = reader.varint();
    reader.at += length;
    this.bytes.copy(reader.data, start, reader.at); // same encoding in both formats
  }
  prefix(): void {}
  write(out: Bytes): void {
    out.copy(this.bytes.buffer, 0, this.bytes.length);
  }
}

class Fixed8Column implements ColumnBuilder {
  readonly kind = 1;
  private readonly bytes = new Bytes();
  read(reader: Reader): void {
    this.bytes.copy(reader.data, reader.at, reader.at + 8);
    reader.at += 8;
  }
  prefix(): void {}
  write(out: Bytes): void {
    out.copy(this.bytes.buffer, 0, this.bytes.length);
  }
}

/**
 * Keys once each (the default, '', first, as ClickHouse writes them), and an index per row. Keys
 * are found by their bytes (FNV-1a into an open-addressing table), with no string made per value.
 */
class LowCardinalityColumn implements ColumnBuilder {
  readonly kind = 2;
  private readonly keys = new Bytes();
  /** Where each key's bytes (after its length) start and end in `keys`. */
  private keyStart: number[] = [];
  private keyEnd: number[] = [];
  /** Key position + 1 by hash slot; 0 is empty. */
  private slots = new Int32Array(256);
  private indexes = new Uint32Array(1024);
  private rows = 0;

  constructor() {
    this.keys.varint(0);
    this.keyStart.push(1);
    this.keyEnd.push(1);
    this.slots[this.slotOf(fnv(this.keys.buffer, 1, 1), this.keys.buffer, 1, 1)] = 1;
  }

  read(reader: Reader): void {
    const start = reader.at;
    const length = reader.varint();
    const from = reader.at;
    const end = from + length;
    reader.at = end;
    const data = reader.data;
    const slot = this.slotOf(fnv(data, from, end), data, from, end);
    let position = this.slots[slot]! - 1;
    if (position < 0) {
      position = this.keyStart.length;
      this.keys.copy(data, start, end);
      this.keyStart.push(this.keys.length - length);
      this.keyEnd.push(this.keys.length);
      this.slots[slot] = position + 1;
      if (this.keyStart.length * 2 > this.slots.length) this.rehash();
    }
    if (this.rows === this.indexes.length) {
      const next = new Uint32Array(this.indexes.length * 2);
      next.set(this.indexes);
      this.indexes = next;
    }
    this.indexes[this.rows++] = position;
  }

  /** The slot holding these bytes' key, or the empty slot where it would go. */
  private slotOf(hash: number, data: Uint8Array, from: number, end: number): number {
    const mask = this.slots.length - 1;
    const keys = this.keys.buffer;
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const held = this.slots[slot]! - 1;
      if (held < 0) return slot;
      const keyStart = this.keyStart[held]!;
      if (this.keyEnd[held]! - keyStart !== end - from) continue;
      let same = true;
      for (let i = 0; i < end - from; i++) {
        if (keys[keyStart + i] !== data[from + i]) {
          same = false;
          break;
        }
      }
      if (same) return slot;
    }
  }

  private rehash(): void {
    this.slots = new Int32Array(this.slots.length * 2);
    const keys = this.keys.buffer;
    for (let position = 0; position < this.keyStart.length; position++) {
      const from = this.keyStart[position]!;
      const end = this.keyEnd[position]!;
      this.slots[this.slotOf(fnv(keys, from, end), keys, from, end)] = position + 1;
    }
  }

  prefix(out: Bytes): void {
    out.u64(1); // KeysSerializationVersion: SharedDictionariesWithAdditionalKeys
  }

  write(out: Bytes): void {
    if (this.rows === 0) return; // ClickHouse writes, and reads, nothing for no rows
    const keys = this.keyStart.length;
    const width = keys <= 0xff ? 1 : keys <= 0xffff ? 2 : 4;
    out.u64((width === 1 ? 0 : width === 2 ? 1 : 2) | (1 << 9)); // index type, HasAdditionalKeys
    out.u64(keys);
    out.copy(this.keys.buffer, 0, this.keys.length);
    out.u64(this.rows);
    out.room(this.rows * width);
    const buffer = out.buffer;
    let at = out.length;
    for (let i = 0; i < this.rows; i++) {
      const index = this.indexes[i]!;
      if (width === 1) buffer[at] = index;
      else if (width === 2) buffer.writeUInt16LE(index, at);
      else buffer.writeUInt32LE(index, at);
      at += width;
    }
    out.length = at;
  }
}

function fnv(data: Uint8Array, from: number, end: number): number {
  let hash = 0x811c9dc5;
  for (let i = from; i < end; i++) hash = Math.imul(hash ^ data[i]!, 0x01000193);
  return hash >>> 0;
}

/** Arrays and maps: cumulative offsets, then the elements (a map's keys, then its values). */
class NestedColumn implements ColumnBuilder {
  readonly kind = 3;
  private readonly offsets = new Bytes();
  private total = 0;

  constructor(private readonly parts: ColumnBuilder[]) {}

  read(reader: Reader): void {
    const count = reader.varint();
    for (let i = 0; i < count; i++) for (const part of this.parts) readValue(part, reader);
    this.total += count;
    this.offsets.u64(this.total);
  }

  prefix(out: Bytes): void {
    for (const part of this.parts) part.prefix(out);
  }

  write(out: Bytes): void {
    out.copy(this.offsets.buffer, 0, this.offsets.length);
    for (const part of this.parts) part.write(out);
  }
}

function readValue(builder: ColumnBuilder, reader: Reader): void {
  switch (builder.kind) {
    case 0:
      return (builder as StringColumn).read(reader);
    case 1:
      return (builder as Fixed8Column).read(reader);
    case 2:
      return (builder as LowCardinalityColumn).read(reader);
    case 3:
      return (builder as NestedColumn).read(reader);
  }
}

function builderFor(type: ColumnType): ColumnBuilder {
  switch (type.kind) {
    case 'string':
      return new StringColumn();
    case 'fixed8':
      return new Fixed8Column();
    case 'lowCardinality':
      return new LowCardinalityColumn();
    case 'array':
      return new NestedColumn([builderFor(type.element)]);
    case 'map':
      return new NestedColumn([builderFor(type.key), builderFor(type.value)]);
  }
}

/** One Native block of every row of `chunks` (RowBinary of `columns`, whose ClickHouse types are `types`). */
export function nativeBlock(chunks: readonly Uint8Array[], columns: readonly string[], types: readonly string[]): Buffer {
  const builders = types.map((type) => builderFor(parseType(type)));
  const reader = new Reader();
  let rows = 0;
  for (const chunk of chunks) {
    reader.data = chunk;
    reader.at = 0;
    while (reader.at < chunk.byteLength) {
      for (const builder of builders) readValue(builder, reader);
      rows++;
    }
  }
  const out = new Bytes();
  out.varint(columns.length);
  out.varint(rows);
  const text = (value: string) => {
    const bytes = Buffer.from(value);
    out.varint(bytes.length);
    out.copy(bytes, 0, bytes.length);
  };
  columns.forEach((column, i) => {
    text(column);
    text(types[i]!);
    builders[i]!.prefix(out);
    builders[i]!.write(out);
  });
  return out.view();
}

/** Where a column's values lie in a Native block: a run of bytes, or offsets and their elements' columns. */
type Extent = { start: number; end: number } | { offsets: number; rows: number; parts: Extent[] };

/** The extent of `rows` values of `type` at `at`, and where they end. */
function extentOf(type: ColumnType, block: Buffer, at: number, rows: number): [Extent, number] {
  switch (type.kind) {
    case 'string': {
      let end = at;
      for (let i = 0; i < rows; i++) {
        let length = 0;
        let scale = 1;
        for (;;) {
          const byte = block[end++]!;
          length += (byte & 0x7f) * scale;
          if (byte < 0x80) break;
          scale *= 128;
        }
        end += length;
      }
      return [{ start: at, end }, end];
    }
    case 'fixed8':
      return [{ start: at, end: at + 8 * rows }, at + 8 * rows];
    case 'array':
    case 'map': {
      const elements = rows === 0 ? 0 : block.readUInt32LE(at + 8 * rows - 8) + block.readUInt32LE(at + 8 * rows - 4) * 0x1_0000_0000;
      let end = at + 8 * rows;
      const parts: Extent[] = [];
      for (const part of type.kind === 'array' ? [type.element] : [type.key, type.value]) {
        const [extent, next] = extentOf(part, block, end, elements);
        parts.push(extent);
        end = next;
      }
      return [{ offsets: at, rows, parts }, end];
    }
    case 'lowCardinality':
      throw new Error('native-block: join blocks with LowCardinality columns as plain strings');
  }
}

/** Appends the values of `extents` (one per block, in order) to `out`: runs copied, offsets moved on by the elements before. */
function joinExtents(extents: Extent[], blocks: Buffer[], out: Bytes): void {
  if ('start' in extents[0]!) {
    extents.forEach((extent, i) => out.copy(blocks[i]!, (extent as { start: number }).start, (extent as { end: number }).end));
    return;
  }
  let base = 0;
  extents.forEach((extent, i) => {
    const { offsets, rows } = extent as { offsets: number; rows: number };
    const block = blocks[i]!;
    let last = 0;
    for (let row = 0; row < rows; row++) {
      last = block.readUInt32LE(offsets + 8 * row) + block.readUInt32LE(offsets + 8 * row + 4) * 0x1_0000_0000;
      out.u64(base + last);
    }
    base += last;
  });
  const parts = (extents[0] as { parts: Extent[] }).parts.length;
  for (let part = 0; part < parts; part++) joinExtents(extents.map((extent) => (extent as { parts: Extent[] }).parts[part]!), blocks, out);
}

let joinedBuffer: Buffer | undefined;

/**
 * One Native block of the rows of `blocks` (Native blocks of the same columns, no
 * LowCardinality): what a batch builder would do with requests written by column. Per column, a
 * copy of each block's run, and per row of arrays and maps an offset moved on. The result is
 * valid until the next call.
 */
export function joinNativeBlocks(blocks: Buffer[]): Buffer {
  const columns: Array<{ name: string; type: string; extents: Extent[] }> = [];
  let rows = 0;
  blocks.forEach((block, b) => {
    const reader = new Reader();
    reader.data = block;
    const count = reader.varint();
    const blockRows = reader.varint();
    rows += blockRows;
    const text = () => {
      const length = reader.varint();
      reader.at += length;
      return block.toString('utf8', reader.at - length, reader.at);
    };
    for (let c = 0; c < count; c++) {
      const name = text();
      const type = text();
      const [extent, end] = extentOf(parseType(type), block, reader.at, blockRows);
      reader.at = end;
      if (b === 0) columns.push({ name, type, extents: [] });
      columns[c]!.extents.push(extent);
    }
  });
  // About the blocks' bytes together (one header fewer per block): no growing on the way. The
  // memory is kept for the next call, as a batch builder would: a fresh 30 MB buffer costs a
  // page fault per 4 KiB on first touch, more than the copies into it.
  const bytes = blocks.reduce((sum, block) => sum + block.byteLength, 64);
  if (!joinedBuffer || joinedBuffer.byteLength < bytes) joinedBuffer = Buffer.allocUnsafeSlow(bytes);
  const out = new Bytes(0, joinedBuffer);
  out.varint(columns.length);
  out.varint(rows);
  for (const { name, type, extents } of columns) {
    for (const value of [name, type]) {
      const bytes = Buffer.from(value);
      out.varint(bytes.length);
      out.copy(bytes, 0, bytes.length);
    }
    joinExtents(extents, blocks, out);
  }
  return out.view();
}
