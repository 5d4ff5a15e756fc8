import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import { TABLE_COLUMNS } from '../../storage/schema.ts';
import { transcodeOtlp } from './index.ts';
import { attrs, ChdbTables, encodeRequest } from '../../test/otlp-requests.ts';

const TRACE_ID = '5b8efff798038103d269b633813fc60c';
const SPAN_ID = 'eee19b7ec3c1b174';
const PARENT_ID = 'eee19b7ec3c1b173';
const START = 1_700_000_000_123_456_789n;
const hex = (h: string) => Buffer.from(h, 'hex');

function span(overrides: Record<string, unknown> = {}) {
  return {
    traceId: hex(TRACE_ID),
    spanId: hex(SPAN_ID),
    parentSpanId: hex(PARENT_ID),
    traceState: 'vendor=1',
    name: 'GET /orders/:id',
    kind: 2,
    startTimeUnixNano: String(START),
    endTimeUnixNano: String(START + 1_500_000n),
    attributes: attrs({ 'http.method': 'GET', 'http.status_code': 200 }),
    ...overrides,
  };
}

function request(spans: object[], resource = attrs({ 'service.name': 'checkout', 'host.name': 'h-1' })) {
  return {
    resourceSpans: [{ resource: { attributes: resource }, scopeSpans: [{ scope: { name: 'http', version: '1.2.3' }, spans }] }],
  };
}

function transcode(body: object, sourceId = 'src-a') {
  return transcodeOtlp('traces', 'protobuf', encodeRequest('traces', body), sourceId);
}

let db: ChdbTables;
beforeAll(async () => {
  db = await ChdbTables.open();
});
afterAll(() => db?.close());
beforeEach(() => db.truncateAll());

function storeAndSelect(body: object, sourceId = 'src-a') {
  const result = transcode(body, sourceId);
  db.insert(result);
  const rows = db.select(
    'SELECT *, toString(toUnixTimestamp64Nano(Timestamp)) AS ns, arrayMap(t -> toString(toUnixTimestamp64Nano(t)), `Events.Timestamp`) AS eventNs FROM otel.otel_traces ORDER BY SpanName',
  );
  return { result, rows };
}

describe('traces: protobuf to otel_traces', () => {
  it('stores a span field by field, as the Collector exporter does', () => {
    const { result, rows } = storeAndSelect(request([span({
      events: [{ timeUnixNano: String(START + 10n), name: 'cache miss', attributes: attrs({ key: 'user:1' }) }],
      links: [{ traceId: hex('0af7651916cd43dd8448eb211c80319c'), spanId: hex('b7ad6b7169203331'), traceState: 'x=y', attributes: attrs({ kind: 'follows' }) }],
      status: { code: 2, message: 'upstream timed out' },
    })]));
    expect(result).toMatchObject({ accepted: 1, rejected: 0 });
    expect(result.rejectMessage).toBeUndefined();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      SourceId: 'src-a',
      TraceId: TRACE_ID,
      SpanId: SPAN_ID,
      ParentSpanId: PARENT_ID,
      TraceState: 'vendor=1',
      SpanName: 'GET /orders/:id',
      SpanKind: 'Server',
      ServiceName: 'checkout',
      ResourceAttributes: { 'service.name': 'checkout', 'host.name': 'h-1' },
      ScopeName: 'http',
      ScopeVersion: '1.2.3',
      SpanAttributes: { 'http.method': 'GET', 'http.status_code': '200' },
      ns: String(START),
      Duration: 1_500_000,
      StatusCode: 'Error',
      StatusMessage: 'upstream timed out',
      'Events.Name': ['cache miss'],
      eventNs: [String(START + 10n)],
      'Events.Attributes': [{ key: 'user:1' }],
      'Links.TraceId': ['0af7651916cd43dd8448eb211c80319c'],
      'Links.SpanId': ['b7ad6b7169203331'],
      'Links.TraceState': ['x=y'],
      'Links.Attributes': [{ kind: 'follows' }],
    });
  });

  it('writes span kinds and status codes with pdata names', () => {
    const kinds = [0, 1, 2, 3, 4, 5, 9];
    const { rows } = storeAndSelect(request(kinds.map((kind) => span({ name: `k${kind}`, kind, status: { code: kind % 4 } }) /* 3 is no status code */)));
    expect(rows.map((r) => [r.SpanName, r.SpanKind, r.StatusCode])).toEqual([
      ['k0', 'Unspecified', 'Unset'],
      ['k1', 'Internal', 'Ok'],
      ['k2', 'Server', 'Error'],
      ['k3', 'Client', ''],
      ['k4', 'Producer', 'Unset'],
      ['k5', 'Consumer', 'Ok'],
      ['k9', '', 'Ok'],
    ]);
  });

  it('stringifies attribute values of every type as pcommon.Value.AsString does', () => {
    const attributes = [
      { key: 'string', value: { stringValue: 'héllo wörld ✓' } },
      { key: 'int', value: { intValue: '-42' } },
      { key: 'int.big', value: { intValue: '9223372036854775807' } },
      { key: 'int.min', value: { intValue: '-9223372036854775808' } },
      { key: 'int.2^53+1', value: { intValue: '9007199254740993' } },
      { key: 'double', value: { doubleValue: 1.5 } },
      { key: 'double.int', value: { doubleValue: 3 } },
      { key: 'double.ms', value: { doubleValue: 12.345 } },
      { key: 'double.random', value: { doubleValue: 0.1 + 0.2 } },
      { key: 'double.tiny', value: { doubleValue: 1e-7 } },
      { key: 'double.huge', value: { doubleValue: 1e21 } },
      { key: 'double.negzero', value: { doubleValue: -0 } },
      { key: 'double.nan', value: { doubleValue: NaN } },
      { key: 'double.inf', value: { doubleValue: -Infinity } },
      { key: 'bool.t', value: { boolValue: true } },
      { key: 'bool.f', value: { boolValue: false } },
      { key: 'bytes', value: { bytesValue: Buffer.from([0, 1, 2, 250, 251]) } },
      { key: 'array', value: { arrayValue: { values: [{ stringValue: 'a"b' }, { intValue: 7 }, { doubleValue: 0.5 }, { boolValue: true }, {}, { bytesValue: Buffer.from('hi') }] } } },
      { key: 'kvlist', value: { kvlistValue: { values: [{ key: 'z', value: { intValue: 1 } }, { key: 'a', value: { kvlistValue: { values: [{ key: 'n', value: { stringValue: '<&>\u2028' } }] } } }, { key: 'z', value: { intValue: 2 } }] } } },
      { key: 'array.nan', value: { arrayValue: { values: [{ doubleValue: NaN }] } } },
      { key: 'empty' },
      { key: 'string.empty', value: { stringValue: '' } },
    ];
    const { rows } = storeAndSelect(request([span({ attributes })]));
    expect(rows[0]!.SpanAttributes).toEqual({
      string: 'héllo wörld ✓',
      int: '-42',
      'int.big': '9223372036854775807',
      'int.min': '-9223372036854775808',
      'int.2^53+1': '9007199254740993',
      double: '1.5',
      'double.int': '3',
      'double.ms': '12.345',
      'double.random': '0.30000000000000004',
      'double.tiny': '1e-7',
      'double.huge': '1e+21',
      'double.negzero': '-0',
      'double.nan': 'json: unsupported value: NaN',
      'double.inf': 'json: unsupported value: -Inf',
      'bool.t': 'true',
      'bool.f': 'false',
      bytes: 'AAEC+vs=',
      array: '["a\\"b",7,0.5,true,null,"aGk="]',
      kvlist: '{"a":{"n":"<&>\\u2028"},"z":2}',
      'array.nan': '',
      empty: '',
      'string.empty': '',
    });
  });

  it('reads any valid wire layout, not only the one SDKs write', () => {
    // Hand-encoded: fields out of order, multi-byte lengths, unknown fields, repeated oneofs.
    const varint = (n: number): number[] => (n < 0x80 ? [n] : [(n & 0x7f) | 0x80, ...varint(n >>> 7)]);
    const field = (number: number, payload: number[] | Buffer): number[] => [(number << 3) | 2, ...varint(payload.length), ...payload];
    const text = (s: string) => [...Buffer.from(s)];
    const long = 'v'.repeat(300);
    const kv = (...parts: number[][]) => field(9, parts.flat());
    const attributes = [
      kv(field(2, field(1, text('value first'))), field(1, text('k1'))),
      kv(field(1, text('k2')), field(2, field(1, text(long)))),
      kv(field(1, text('k3')), [0x50, 0x01], field(2, [0x18, ...varint(5)])), // unknown varint field 10
      kv(field(1, text('k4')), field(2, [...field(1, text('replaced')), 0x10, 0x01])), // oneof: the last (bool) wins
      kv(field(1, text('k'.repeat(130))), field(2, field(1, text('long key')))),
    ].flat();
    const spanBytes = [
      ...field(5, text('wire')),
      ...attributes,
      ...field(2, Buffer.from(SPAN_ID, 'hex')),
      ...field(1, Buffer.from(TRACE_ID, 'hex')),
      0x30, 0x03, // kind CLIENT
    ];
    const scopeSpans = [...field(2, spanBytes), ...field(1, field(1, text('late scope')))];
    const resourceSpans = [...field(2, scopeSpans), ...field(3, text('https://schema')), ...field(1, field(1, [...field(1, text('service.name')), ...field(2, field(1, text('svc')))]))];
    const result = transcodeOtlp('traces', 'protobuf', Uint8Array.from(field(1, resourceSpans)), 'src-a');
    expect(result).toMatchObject({ accepted: 1, rejected: 0 });
    db.insert(result);
    const [row] = db.select('SELECT SpanName, SpanKind, ServiceName, ScopeName, TraceId, SpanId, SpanAttributes FROM otel.otel_traces');
    expect(row).toEqual({
      SpanName: 'wire', SpanKind: 'Client', ServiceName: 'svc', ScopeName: 'late scope', TraceId: TRACE_ID, SpanId: SPAN_ID,
      SpanAttributes: { k1: 'value first', k2: long, k3: '5', k4: 'true', ['k'.repeat(130)]: 'long key' },
    });
  });

  it('copies the resource and scope columns into every span of their group', () => {
    const body = {
      resourceSpans: [
        {
          resource: { attributes: attrs({ 'service.name': 'a' }) },
          scopeSpans: [
            { scope: { name: 's1' }, spans: [span({ name: 'a1' }), span({ name: 'a2' })] },
            { scope: { name: 's2', version: 'v2' }, spans: [span({ name: 'a3' })] },
          ],
        },
        { resource: { attributes: attrs({ 'service.name': 7, zone: 'eu' }) }, scopeSpans: [{ spans: [span({ name: 'b1' })] }] },
        { scopeSpans: [{ spans: [span({ name: 'c1' })] }] },
      ],
    };
    const { result, rows } = storeAndSelect(body, 'tenant-9');
    expect(result.accepted).toBe(5);
    expect(rows.map((r) => [r.SpanName, r.SourceId, r.ServiceName, r.ScopeName, r.ScopeVersion, r.ResourceAttributes])).toEqual([
      ['a1', 'tenant-9', 'a', 's1', '', { 'service.name': 'a' }],
      ['a2', 'tenant-9', 'a', 's1', '', { 'service.name': 'a' }],
      ['a3', 'tenant-9', 'a', 's2', 'v2', { 'service.name': 'a' }],
      ['b1', 'tenant-9', '7', '', '', { 'service.name': '7', zone: 'eu' }],
      ['c1', 'tenant-9', '', '', '', {}],
    ]);
  });

  it('writes empty or all-zero ids as "", and clamps a negative duration to 0', () => {
    const { rows } = storeAndSelect(request([
      span({ name: 'root', parentSpanId: Buffer.alloc(0), endTimeUnixNano: String(START - 5n) }),
      span({ name: 'zero', traceId: Buffer.alloc(16), parentSpanId: Buffer.alloc(8) }),
    ]));
    expect(rows.map((r) => [r.SpanName, r.TraceId, r.ParentSpanId, r.Duration])).toEqual([
      ['root', TRACE_ID, '', 0],
      ['zero', '', '', 1_500_000],
    ]);
  });

  it('fills the trace id lookup table through the materialized view', () => {
    storeAndSelect(request([span({ startTimeUnixNano: '1700000000000000000' }), span({ spanId: hex('0000000000000001'), startTimeUnixNano: '1700000100000000000' })]));
    expect(db.select('SELECT SourceId, TraceId, toUnixTimestamp(Start) AS s, toUnixTimestamp(End) AS e FROM otel.otel_traces_trace_id_ts')).toEqual([
      { SourceId: 'src-a', TraceId: TRACE_ID, s: 1_700_000_000, e: 1_700_000_100 },
    ]);
  });

  it('refuses a span with a malformed id on its own, with a message, and stores the rest', () => {
    const { result, rows } = storeAndSelect(request([
      span({ name: 'ok-1' }),
      span({ name: 'short-trace', traceId: hex('0102') }),
      span({ name: 'no-span-id', spanId: Buffer.alloc(0) }),
      span({ name: 'bad-parent', parentSpanId: hex('01') }),
      span({ name: 'bad-link', links: [{ traceId: hex('01'), spanId: hex(SPAN_ID) }] }),
      span({ name: 'ok-2' }),
    ]));
    expect(result.accepted).toBe(2);
    expect(result.rejected).toBe(4);
    expect(result.rejectMessage).toBe('span 2: trace_id is 2 bytes, not 16 (and 3 more)');
    expect(rows.map((r) => r.SpanName)).toEqual(['ok-1', 'ok-2']);
  });

  it('treats an empty request as zero spans', () => {
    expect(transcodeOtlp('traces', 'protobuf', new Uint8Array(0), 's')).toEqual({ tables: [], accepted: 0, rejected: 0 });
    expect(transcode({ resourceSpans: [{ scopeSpans: [{}] }] })).toEqual({ tables: [], accepted: 0, rejected: 0 });
  });

  it('returns rows in a buffer of their own, labelled with the insert columns', () => {
    const result = transcode(request([span(), span()]));
    const [table] = result.tables;
    expect(table!.table).toBe('otel_traces');
    expect(table!.columns).toBe(TABLE_COLUMNS.otel_traces);
    expect(table!.rows).toBe(2);
    expect(table!.data.byteOffset).toBe(0);
    expect(table!.data.byteLength).toBe(table!.data.buffer.byteLength);
  });
});

describe('traces: chunking for the bus', () => {
  it('cuts rows into chunks of about maxChunkBytes, between rows, and they insert on their own', () => {
    const spans = Array.from({ length: 50 }, (_, i) => span({ name: `s-${String(i).padStart(2, '0')}`, spanId: Buffer.from(String(i).padStart(16, '0'), 'hex') }));
    const whole = transcode(request(spans));
    const rowBytes = whole.tables[0]!.data.byteLength / 50;
    const chunked = transcodeOtlp('traces', 'protobuf', encodeRequest('traces', request(spans)), 'src-a', rowBytes * 10);
    expect(chunked.tables.length).toBeGreaterThanOrEqual(4);
    expect(chunked.tables.reduce((n, t) => n + t.rows, 0)).toBe(50);
    expect(chunked.accepted).toBe(50);
    for (const table of chunked.tables) expect(table.data.byteLength).toBeLessThan(rowBytes * 12);
    // The chunks concatenated are exactly the unchunked rows.
    expect(Buffer.concat(chunked.tables.map((t) => t.data))).toEqual(Buffer.from(whole.tables[0]!.data));
    for (const table of chunked.tables) db.insert({ ...chunked, tables: [table] });
    expect(db.select('SELECT count() AS n, uniqExact(SpanName) AS names FROM otel.otel_traces')).toEqual([{ n: 50, names: 50 }]);
  });
});

describe('traces: undecodable requests', () => {
  const good = () => encodeRequest('traces', request([span()]));
  const refusal = (body: Uint8Array) => {
    try {
      transcodeOtlp('traces', 'protobuf', body, 's');
    } catch (err) {
      return err;
    }
    throw new Error('expected a refusal');
  };

  it('refuses a truncated request with bad_request', () => {
    const body = good();
    for (const cut of [1, 10, body.length - 1]) {
      const err = refusal(body.subarray(0, cut));
      expect(err).toBeInstanceOf(SluiceError);
      expect((err as SluiceError).code).toBe('bad_request');
      expect((err as SluiceError).message).toMatch(/^malformed protobuf: /);
    }
  });

  it('refuses garbage bytes', () => {
    for (const garbage of [Buffer.from('hello, world'), Buffer.from([0xff, 0xff, 0xff]), Buffer.from([0x0b, 0x00]), Buffer.from([0x0a, 0x05, 0x0f])]) {
      expect((refusal(garbage) as SluiceError).code).toBe('bad_request');
    }
  });

  it('refuses invalid UTF-8 in any string it stores', () => {
    const marker = 'MARKER';
    const long = 'L'.repeat(60) + marker; // past the short-copy path
    const bodies = [
      request([span({ name: marker })]),
      request([span({ attributes: attrs({ [marker]: 'v' }) })]),
      request([span({ attributes: attrs({ k: marker }) })]),
      request([span({ attributes: attrs({ k: long }) })]),
      request([span()], attrs({ 'service.name': marker })),
      request([span({ events: [{ name: marker }] })]),
      request([span({ attributes: [{ key: 'a', value: { arrayValue: { values: [{ stringValue: marker }] } } }] })]),
    ];
    for (const body of bodies) {
      const bytes = Buffer.from(encodeRequest('traces', body));
      const at = bytes.indexOf(marker);
      bytes.set([0x4d, 0xc3, 0x28], at); // 0xc3 starts a two-byte sequence; 0x28 cannot continue it
      expect((refusal(bytes) as SluiceError).message, JSON.stringify(body).slice(0, 80)).toBe('invalid UTF-8 in a protobuf string field');
    }
    expect(transcode(request([span({ name: 'naïve ✓ 🎉', attributes: attrs({ 'ключ': 'значение '.repeat(10) }) })])).accepted).toBe(1);
  });
});
