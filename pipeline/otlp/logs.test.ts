import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import { transcodeOtlp } from './index.ts';
import { attrs, ChdbTables, encodeRequest } from '../../test/otlp-requests.ts';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const SPAN_ID = 'b7ad6b7169203331';
const TIME = 1_700_000_000_987_654_321n;
const hex = (h: string) => Buffer.from(h, 'hex');

function record(overrides: Record<string, unknown> = {}) {
  return {
    timeUnixNano: String(TIME),
    observedTimeUnixNano: String(TIME + 1000n),
    severityNumber: 17,
    severityText: 'ERROR',
    body: { stringValue: 'payment failed' },
    attributes: attrs({ 'user.id': 'u-1', attempt: 3 }),
    flags: 0x101,
    traceId: hex(TRACE_ID),
    spanId: hex(SPAN_ID),
    eventName: 'payment.failure',
    ...overrides,
  };
}

function request(records: object[]) {
  return {
    resourceLogs: [{
      resource: { attributes: attrs({ 'service.name': 'payments', 'k8s.pod.name': 'payments-7f9' }) },
      schemaUrl: 'https://opentelemetry.io/schemas/1.26.0',
      scopeLogs: [{
        scope: { name: 'app.logger', version: '2.0', attributes: attrs({ 'scope.kind': 'logger' }) },
        schemaUrl: 'https://opentelemetry.io/schemas/1.25.0',
        logRecords: records,
      }],
    }],
  };
}

let db: ChdbTables;
beforeAll(async () => {
  db = await ChdbTables.open();
});
afterAll(() => db?.close());
beforeEach(() => db.truncateAll());

function storeAndSelect(body: object) {
  const result = transcodeOtlp('logs', 'protobuf', encodeRequest('logs', body), 'src-logs');
  db.insert(result);
  const rows = db.select('SELECT *, toString(toUnixTimestamp64Nano(Timestamp)) AS ns FROM otel.otel_logs ORDER BY ns, Body');
  return { result, rows };
}

describe('logs: protobuf to otel_logs', () => {
  it('stores a log record field by field', () => {
    const { result, rows } = storeAndSelect(request([record()]));
    expect(result).toMatchObject({ accepted: 1, rejected: 0 });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      SourceId: 'src-logs',
      ns: String(TIME),
      TraceId: TRACE_ID,
      SpanId: SPAN_ID,
      TraceFlags: 1,
      SeverityText: 'ERROR',
      SeverityNumber: 17,
      ServiceName: 'payments',
      Body: 'payment failed',
      ResourceSchemaUrl: 'https://opentelemetry.io/schemas/1.26.0',
      ResourceAttributes: { 'service.name': 'payments', 'k8s.pod.name': 'payments-7f9' },
      ScopeSchemaUrl: 'https://opentelemetry.io/schemas/1.25.0',
      ScopeName: 'app.logger',
      ScopeVersion: '2.0',
      ScopeAttributes: { 'scope.kind': 'logger' },
      LogAttributes: { 'user.id': 'u-1', attempt: '3' },
      EventName: 'payment.failure',
    });
    // The exporter's materialized resource columns are computed by ClickHouse.
    expect(db.select('SELECT `__otel_materialized_k8s.pod.name` AS pod FROM otel.otel_logs')).toEqual([{ pod: 'payments-7f9' }]);
  });

  it('stringifies bodies of every type and falls back to the observed time', () => {
    const { rows } = storeAndSelect(request([
      record({ body: { intValue: '12' }, timeUnixNano: '0', observedTimeUnixNano: '1000' }),
      record({ body: { kvlistValue: { values: [{ key: 'msg', value: { stringValue: 'hi' } }, { key: 'code', value: { intValue: 5 } }] } }, timeUnixNano: '2000' }),
      record({ body: { boolValue: true }, timeUnixNano: '3000' }),
      record({ body: undefined, timeUnixNano: '4000' }),
    ]));
    expect(rows.map((r) => [r.ns, r.Body])).toEqual([
      ['1000', '12'],
      ['2000', '{"code":5,"msg":"hi"}'],
      ['3000', 'true'],
      ['4000', ''],
    ]);
  });

  it('stores a record without trace context with empty ids', () => {
    const { rows } = storeAndSelect(request([record({ traceId: undefined, spanId: Buffer.alloc(8), flags: 0, severityNumber: 0, severityText: '' })]));
    expect(rows[0]).toMatchObject({ TraceId: '', SpanId: '', TraceFlags: 0, SeverityNumber: 0, SeverityText: '' });
  });

  it('refuses a record with a malformed id on its own', () => {
    const { result, rows } = storeAndSelect(request([
      record({ body: { stringValue: 'kept' } }),
      record({ spanId: hex('0102030405') }),
      record({ traceId: hex('01') }),
    ]));
    expect(result).toMatchObject({ accepted: 1, rejected: 2, rejectMessage: 'log record 2: span_id is 5 bytes, not 0 or 8 (and 1 more)' });
    expect(rows.map((r) => r.Body)).toEqual(['kept']);
  });

  it('refuses an undecodable request and treats an empty one as no records', () => {
    const body = encodeRequest('logs', request([record()]));
    expect(() => transcodeOtlp('logs', 'protobuf', body.subarray(0, body.length - 3), 's')).toThrow(SluiceError);
    expect(transcodeOtlp('logs', 'protobuf', new Uint8Array(0), 's')).toEqual({ tables: [], accepted: 0, rejected: 0 });
  });
});
