import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import { transcodeOtlp, type Signal } from './index.ts';
import { attrs, encodeRequest } from '../../test/otlp-requests.ts';

const ids = { traceId: Buffer.alloc(16, 7), spanId: Buffer.alloc(8, 9) };
const attributes = [...attrs({ s: 'text', i: 42, d: 1.25, b: true }), { key: 'a', value: { arrayValue: { values: [{ stringValue: 'x' }, { kvlistValue: { values: [{ key: 'k', value: { intValue: 1 } }] } }] } } }];
const REQUESTS: Record<Signal, object> = {
  traces: { resourceSpans: [{ resource: { attributes: attrs({ 'service.name': 'svc' }) }, scopeSpans: [{ scope: { name: 'lib' }, spans: [
    { ...ids, name: 'a', startTimeUnixNano: '1', endTimeUnixNano: '2', attributes, events: [{ name: 'e', attributes }], links: [{ ...ids, attributes }], status: { code: 1 } },
    { ...ids, name: 'b', attributes },
  ] }] }] },
  logs: { resourceLogs: [{ resource: { attributes }, scopeLogs: [{ scope: { name: 'l', attributes }, logRecords: [{ ...ids, body: { kvlistValue: { values: attributes } }, attributes }] }] }] },
  metrics: { resourceMetrics: [{ resource: { attributes }, scopeMetrics: [{ metrics: [
    { name: 'g', gauge: { dataPoints: [{ attributes, asDouble: 1, exemplars: [{ ...ids, filteredAttributes: attributes }] }] } },
    { name: 'h', histogram: { dataPoints: [{ attributes, count: '3', bucketCounts: ['1', '2'], explicitBounds: [5] }] } },
    { name: 'e', exponentialHistogram: { dataPoints: [{ attributes, positive: { offset: 1, bucketCounts: ['1', '300'] } }] } },
    { name: 's', summary: { dataPoints: [{ attributes, quantileValues: [{ quantile: 0.5, value: 1 }] }] } },
  ] }] }] },
};

/** A small seeded PRNG, so a failure can be replayed. */
function random(seed: number) {
  return () => (seed = (seed * 16807) % 2147483647) / 2147483647;
}

describe('corrupted requests', () => {
  it('either transcode or are refused with bad_request, never anything else', () => {
    const rand = random(42);
    for (const signal of ['traces', 'logs', 'metrics'] as const) {
      const valid = encodeRequest(signal, REQUESTS[signal]);
      expect(transcodeOtlp(signal, 'protobuf', valid, 's').rejected).toBe(0);
      for (let i = 0; i < 3000; i++) {
        const body = Buffer.from(valid);
        const flips = 1 + Math.floor(rand() * 3);
        for (let f = 0; f < flips; f++) body[Math.floor(rand() * body.length)] = Math.floor(rand() * 256);
        const cut = rand() < 0.3 ? Math.floor(rand() * body.length) : body.length;
        try {
          const result = transcodeOtlp(signal, 'protobuf', body.subarray(0, cut), 's');
          for (const table of result.tables) expect(table.data.byteLength).toBeGreaterThan(0);
        } catch (err) {
          expect(err, `${signal} case ${i}`).toBeInstanceOf(SluiceError);
          expect((err as SluiceError).code).toBe('bad_request');
        }
      }
    }
  });
});
