/**
 * The envelope all three OTLP export requests share:
 *   Export*ServiceRequest { repeated Resource* = 1 }
 *   Resource* { Resource resource = 1; repeated Scope* = 2; string schema_url = 3 }
 *   Scope*    { InstrumentationScope scope = 1; repeated <item> = 2; string schema_url = 3 }
 *
 * walkRequest visits every item (span, log record, metric) once the resource- and
 * scope-level columns of its row are encoded in a RowPrefix: that is done once per Resource*
 * and Scope* message and copied into each row, instead of re-encoding the resource
 * attributes for every span. schema_url follows the items on the wire, so each envelope
 * message is scanned for its own fields before its items are walked.
 */
import { TABLE_COLUMNS, type TableName } from '../../storage/schema.ts';
import { findAttribute, writeAllAttributes, writeAnyValue } from './anyvalue.ts';
import type { RowBinaryWriter } from '../../storage/rowbinary.ts';
import { fieldTag, LEN, VARINT, type WireReader } from './wire.ts';

const FIRST = fieldTag(1, LEN); // Resource* in the request; resource or scope in the envelope
const ITEMS = fieldTag(2, LEN); // Scope* in Resource*; items in Scope*
const SCHEMA_URL = fieldTag(3, LEN);

const RESOURCE_ATTRIBUTES = fieldTag(1, LEN);
const SCOPE_NAME = fieldTag(1, LEN);
const SCOPE_VERSION = fieldTag(2, LEN);
const SCOPE_ATTRIBUTES = fieldTag(3, LEN);
const SCOPE_DROPPED_ATTRIBUTES = fieldTag(4, VARINT);

const SERVICE_NAME = Buffer.from('service.name');

const RESOURCE_COLUMNS = new Set(['ServiceName', 'ResourceAttributes', 'ResourceSchemaUrl']);
const SCOPE_COLUMNS = new Set(['ScopeName', 'ScopeVersion', 'ScopeAttributes', 'ScopeDroppedAttrCount', 'ScopeSchemaUrl']);

/** The byte ranges of an envelope message's own fields ([0, 0] when absent). */
interface EnvelopeFields {
  start: number;
  end: number;
  schemaUrlStart: number;
  schemaUrlEnd: number;
}

/**
 * The leading columns of every row of a table: SourceId, the resource columns, the scope
 * columns, then (metrics) the metric's own. Each level is re-encoded in place when the walk
 * enters a new message at that level; copyInto writes the whole prefix into a row.
 */
export class RowPrefix {
  private readonly resourceColumns: string[] = [];
  private readonly scopeColumns: string[] = [];
  private readonly sourceEnd: number;
  private resourceEnd = 0;
  private scopeEnd = 0;
  private bytes: Uint8Array = new Uint8Array(0);

  /** @param w where the prefix is kept: a pooled writer, reused from request to request. */
  constructor(table: TableName, sourceId: string, private readonly w: RowBinaryWriter) {
    const columns = TABLE_COLUMNS[table];
    let i = 1;
    while (RESOURCE_COLUMNS.has(columns[i]!)) this.resourceColumns.push(columns[i++]!);
    while (SCOPE_COLUMNS.has(columns[i]!)) this.scopeColumns.push(columns[i++]!);
    // The prefix is only a prefix if the table lists its columns in this order.
    if (columns[0] !== 'SourceId' || columns.slice(i).some((c) => RESOURCE_COLUMNS.has(c) || SCOPE_COLUMNS.has(c))) {
      throw new Error(`TABLE_COLUMNS.${table} must start with SourceId, then resource, then scope columns`);
    }
    this.w.string(sourceId);
    this.sourceEnd = this.w.pos;
  }

  setResource(r: WireReader, resource: EnvelopeFields): void {
    const w = this.w;
    w.truncate(this.sourceEnd);
    for (const column of this.resourceColumns) {
      if (column === 'ServiceName') {
        const value = findAttribute(r, resource.start, resource.end, RESOURCE_ATTRIBUTES, SERVICE_NAME);
        if (value) writeAnyValue(r, w, value[0], value[1]);
        else w.emptyString();
      } else if (column === 'ResourceAttributes') {
        writeAllAttributes(r, w, resource.start, resource.end, RESOURCE_ATTRIBUTES);
      } else {
        w.utf8(r.buf, resource.schemaUrlStart, resource.schemaUrlEnd);
      }
    }
    this.resourceEnd = this.scopeEnd = w.pos;
  }

  setScope(r: WireReader, scope: EnvelopeFields): void {
    const w = this.w;
    w.truncate(this.resourceEnd);
    let nameStart = 0, nameEnd = 0, versionStart = 0, versionEnd = 0, dropped = 0;
    r.pos = scope.start;
    while (r.pos < scope.end) {
      const tag = r.tag(scope.end);
      if (tag === SCOPE_NAME || tag === SCOPE_VERSION) {
        const fieldEnd = r.len(scope.end);
        if (tag === SCOPE_NAME) [nameStart, nameEnd] = [r.pos, fieldEnd];
        else [versionStart, versionEnd] = [r.pos, fieldEnd];
        r.pos = fieldEnd;
      } else if (tag === SCOPE_DROPPED_ATTRIBUTES) dropped = r.uint32(scope.end);
      else r.skip(tag, scope.end);
    }
    r.expectEnd(scope.end);
    for (const column of this.scopeColumns) {
      if (column === 'ScopeName') w.utf8(r.buf, nameStart, nameEnd);
      else if (column === 'ScopeVersion') w.utf8(r.buf, versionStart, versionEnd);
      else if (column === 'ScopeAttributes') writeAllAttributes(r, w, scope.start, scope.end, SCOPE_ATTRIBUTES);
      else if (column === 'ScopeDroppedAttrCount') w.u32(dropped);
      else w.utf8(r.buf, scope.schemaUrlStart, scope.schemaUrlEnd);
    }
    this.scopeEnd = w.pos;
  }

  /** The prefix writer positioned after the scope columns, for a further level's columns. */
  extend(): RowBinaryWriter {
    this.w.truncate(this.scopeEnd);
    return this.w;
  }

  /** Starts a row in `out` with the prefix. */
  copyInto(out: RowBinaryWriter): void {
    // A plain view of the current prefix, remade only when the prefix changed: a Buffer's
    // subarray() per row would cost more than the copy itself.
    const { buf, pos } = this.w;
    if (this.bytes.buffer !== buf.buffer || this.bytes.byteOffset !== buf.byteOffset || this.bytes.length !== pos) {
      this.bytes = new Uint8Array(buf.buffer, buf.byteOffset, pos);
    }
    out.bytes(this.bytes);
  }
}

/** Visits one item: its message is at [start, end); pos may be left anywhere. */
export type ItemVisitor = (start: number, end: number) => void;

/** Walks an export request, keeping `prefix` current, and visits every item. */
export function walkRequest(r: WireReader, prefix: RowPrefix, visit: ItemVisitor): void {
  const fields: EnvelopeFields = { start: 0, end: 0, schemaUrlStart: 0, schemaUrlEnd: 0 };
  const end = r.buf.length;
  forEachField(r, 0, end, FIRST, (resourceStart, resourceEnd) => {
    scanEnvelope(r, resourceStart, resourceEnd, fields);
    prefix.setResource(r, fields);
    forEachField(r, resourceStart, resourceEnd, ITEMS, (scopeStart, scopeEnd) => {
      scanEnvelope(r, scopeStart, scopeEnd, fields);
      prefix.setScope(r, fields);
      forEachField(r, scopeStart, scopeEnd, ITEMS, visit);
    });
  });
}

/** Calls `visit` for every length-delimited field with `tag` in [start, end). */
function forEachField(r: WireReader, start: number, end: number, tag: number, visit: ItemVisitor): void {
  r.pos = start;
  while (r.pos < end) {
    const t = r.tag(end);
    if (t !== tag) {
      r.skip(t, end);
      continue;
    }
    const fieldEnd = r.len(end);
    visit(r.pos, fieldEnd);
    r.pos = fieldEnd;
  }
  r.expectEnd(end);
}

/** Finds field 1 (the resource or scope) and field 3 (schema_url) of an envelope message. */
function scanEnvelope(r: WireReader, start: number, end: number, into: EnvelopeFields): void {
  into.start = into.end = into.schemaUrlStart = into.schemaUrlEnd = 0;
  r.pos = start;
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag !== FIRST && tag !== SCHEMA_URL) {
      r.skip(tag, end);
      continue;
    }
    const fieldEnd = r.len(end);
    if (tag === FIRST) [into.start, into.end] = [r.pos, fieldEnd];
    else [into.schemaUrlStart, into.schemaUrlEnd] = [r.pos, fieldEnd];
    r.pos = fieldEnd;
  }
  r.expectEnd(end);
}
