import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import { transcodeOtlp, type Signal } from './index.ts';
import { encodeRequest } from '../../test/otlp-requests.ts';

const TRACE_ID = '5b8efff798038103d269b633813fc60c';
const SPAN_ID = 'eee19b7ec3c1b174';

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const fromJson = (signal: Signal, value: unknown) => transcodeOtlp(signal, 'json', json(value), 'src');
const fromProtobuf = (signal: Signal, request: object) => transcodeOtlp(signal, 'protobuf', encodeRequest(signal, request), 'src');

/** The same span as protobufjs input (base64-free: Buffers for bytes). */
const protobufSpan = {
  traceId: Buffer.from(TRACE_ID, 'hex'),
  spanId: Buffer.from(SPAN_ID, 'hex'),
  parentSpanId: Buffer.alloc(0),
  name: 'op',
  kind: 3,
  startTimeUnixNano: '1700000000000000001',
  endTimeUnixNano: '1700000000000000101',
  attributes: [
    { key: 'n', value: { intValue: '9007199254740993' } },
    { key: 'b', value: { bytesValue: Buffer.from('hello') } },
    { key: 'd', value: { doubleValue: 2.5 } },
  ],
  events: [{ timeUnixNano: '1700000000000000050', name: 'e' }],
  links: [{ traceId: Buffer.alloc(16, 0xab), spanId: Buffer.alloc(8, 0xcd) }],
  status: { code: 2, message: 'bad' },
};

function tracesRequest(spanJson: object, scope: object = { name: 'lib' }) {
  return { resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'svc' } }] }, scopeSpans: [{ scope, spans: [spanJson] }] }] };
}

describe('OTLP/JSON', () => {
  it('gives the same rows as the protobuf request (hex ids, enums by name, int64 as strings)', () => {
    const viaJson = fromJson('traces', tracesRequest({
      traceId: TRACE_ID,
      spanId: SPAN_ID,
      parentSpanId: '',
      name: 'op',
      kind: 'SPAN_KIND_CLIENT',
      startTimeUnixNano: '1700000000000000001',
      endTimeUnixNano: '1700000000000000101',
      attributes: [
        { key: 'n', value: { intValue: '9007199254740993' } },
        { key: 'b', value: { bytesValue: Buffer.from('hello').toString('base64') } },
        { key: 'd', value: { doubleValue: 2.5 } },
      ],
      events: [{ timeUnixNano: '1700000000000000050', name: 'e' }],
      links: [{ traceId: 'ab'.repeat(16), spanId: 'CD'.repeat(8) }],
      status: { code: 'STATUS_CODE_ERROR', message: 'bad' },
      someFutureField: { nested: true },
    }));
    const viaProtobuf = fromProtobuf('traces', tracesRequest(protobufSpan));
    expect(viaJson.accepted).toBe(1);
    expect(Buffer.from(viaJson.tables[0]!.data)).toEqual(Buffer.from(viaProtobuf.tables[0]!.data));
  });

  it('accepts snake_case keys, enums as integers and int64 as numbers', () => {
    const viaJson = fromJson('traces', {
      resource_spans: [{
        resource: { attributes: [{ key: 'service.name', value: { string_value: 'svc' } }] },
        scope_spans: [{
          scope: { name: 'lib' },
          spans: [{
            trace_id: TRACE_ID,
            span_id: SPAN_ID,
            name: 'op',
            kind: 3,
            start_time_unix_nano: 1700000000000000001n.toString(),
            end_time_unix_nano: '1700000000000000101',
            attributes: [
              { key: 'n', value: { int_value: '9007199254740993' } },
              { key: 'b', value: { bytes_value: 'aGVsbG8=' } },
              { key: 'd', value: { double_value: 2.5 } },
            ],
            events: [{ time_unix_nano: '1700000000000000050', name: 'e' }],
            links: [{ trace_id: 'ab'.repeat(16), span_id: 'cd'.repeat(8) }],
            status: { code: 2, message: 'bad' },
          }],
        }],
      }],
    });
    expect(Buffer.from(viaJson.tables[0]!.data)).toEqual(Buffer.from(fromProtobuf('traces', tracesRequest(protobufSpan)).tables[0]!.data));
    const small = fromJson('logs', { resourceLogs: [{ scopeLogs: [{ logRecords: [{ timeUnixNano: 1700000000, severityNumber: 9, body: { stringValue: 'x' } }] }] }] });
    expect(small.accepted).toBe(1);
  });

  it('reads logs and metrics in JSON like their protobuf', () => {
    const logs = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ timeUnixNano: '5', severityNumber: 'SEVERITY_NUMBER_WARN', severityText: 'WARN', traceId: TRACE_ID, spanId: SPAN_ID, flags: 1, body: { kvlistValue: { values: [{ key: 'a', value: { boolValue: true } }] } } }] }] }] };
    const logsProtobuf = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ timeUnixNano: '5', severityNumber: 13, severityText: 'WARN', traceId: Buffer.from(TRACE_ID, 'hex'), spanId: Buffer.from(SPAN_ID, 'hex'), flags: 1, body: { kvlistValue: { values: [{ key: 'a', value: { boolValue: true } }] } } }] }] }] };
    expect(Buffer.from(fromJson('logs', logs).tables[0]!.data)).toEqual(Buffer.from(fromProtobuf('logs', logsProtobuf).tables[0]!.data));

    const metric = (exemplarIds: object) => ({
      resourceMetrics: [{ scopeMetrics: [{ metrics: [{
        name: 'm', sum: { aggregationTemporality: 'AGGREGATION_TEMPORALITY_CUMULATIVE', isMonotonic: true, dataPoints: [{ timeUnixNano: '2000000000', asInt: '42', exemplars: [{ asDouble: 1.5, ...exemplarIds }] }] },
      }] }] }],
    });
    const viaJson = fromJson('metrics', metric({ traceId: TRACE_ID, spanId: SPAN_ID }));
    const viaProtobuf = fromProtobuf('metrics', metric({ traceId: Buffer.from(TRACE_ID, 'hex'), spanId: Buffer.from(SPAN_ID, 'hex') }));
    expect(viaJson.tables.map((t) => t.table)).toEqual(['otel_metrics_sum']);
    expect(Buffer.from(viaJson.tables[0]!.data)).toEqual(Buffer.from(viaProtobuf.tables[0]!.data));
  });

  it('treats an empty body or {} as an empty request', () => {
    expect(transcodeOtlp('traces', 'json', new Uint8Array(0), 's')).toEqual({ tables: [], accepted: 0, rejected: 0 });
    expect(fromJson('metrics', {})).toEqual({ tables: [], accepted: 0, rejected: 0 });
    expect(fromJson('logs', { resourceLogs: [] })).toEqual({ tables: [], accepted: 0, rejected: 0 });
  });

  it('still refuses malformed spans one by one', () => {
    const result = fromJson('traces', tracesRequest({ traceId: 'abcd', spanId: SPAN_ID, name: 'x' }));
    expect(result).toMatchObject({ accepted: 0, rejected: 1, rejectMessage: 'span 1: trace_id is 2 bytes, not 16' });
  });

  it('refuses what it cannot read with bad_request', () => {
    const refusal = (body: Uint8Array) => {
      try {
        transcodeOtlp('traces', 'json', body, 's');
      } catch (err) {
        expect(err).toBeInstanceOf(SluiceError);
        expect((err as SluiceError).code).toBe('bad_request');
        return (err as SluiceError).message;
      }
      throw new Error('expected a refusal');
    };
    expect(refusal(Buffer.from('{"resourceSpans": ['))).toMatch(/^malformed JSON: /);
    expect(refusal(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]))).toBe('invalid UTF-8 in the JSON body');
    expect(refusal(json([1, 2]))).toBe('invalid OTLP/JSON: the request must be an object');
    expect(refusal(json({ resourceSpans: {} }))).toBe('invalid OTLP/JSON: resourceSpans must be an array');
    expect(refusal(json(tracesRequest({ traceId: 'not hex!', spanId: SPAN_ID })))).toBe('invalid OTLP/JSON: resourceSpans[0].scopeSpans[0].spans[0].traceId must be a hex string');
    expect(refusal(json(tracesRequest({ traceId: TRACE_ID, spanId: SPAN_ID, startTimeUnixNano: 'soon' })))).toBe('invalid OTLP/JSON: resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano must be an integer from 0 to 2^64-1, as a decimal string or a number');
    expect(refusal(json(tracesRequest({ traceId: TRACE_ID, spanId: SPAN_ID, attributes: [{ key: 'k', value: 'plain' }] })))).toMatch(/^invalid OTLP\/JSON: .*attributes\[0\]\.value must be an object$/);
    // A value nested 200,000 levels deep: refused, not a stack overflow (a 500).
    const d = 200_000;
    const deep = `{"resourceSpans":[{"resource":{"attributes":[{"key":"a","value":${'{"arrayValue":{"values":['.repeat(d)}{"stringValue":"x"}${']}}'.repeat(d)}}]}}]}`;
    expect(refusal(Buffer.from(deep))).toBe('JSON nested deeper than 512 levels');
  });

});
