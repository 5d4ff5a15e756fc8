import { describe, expect, it } from 'vitest';
import { encodeExportResponse, encodeStatus } from './otlp-response.ts';

describe('OTLP responses', () => {
  it('encodes full success as an empty message', () => {
    expect(encodeExportResponse('traces', 'protobuf')).toEqual(new Uint8Array(0));
    expect(encodeExportResponse('traces', 'json', { rejected: 0 })).toBe('{}');
  });

  it('encodes partial_success in protobuf and JSON', () => {
    // field 1 (message) { field 1 varint 300, field 2 "bad" }
    const inner = [0x08, 0xac, 0x02, 0x12, 0x03, 0x62, 0x61, 0x64];
    expect([...(encodeExportResponse('logs', 'protobuf', { rejected: 300, message: 'bad' }) as Uint8Array)]).toEqual([0x0a, inner.length, ...inner]);
    expect(JSON.parse(encodeExportResponse('metrics', 'json', { rejected: 2, message: 'bad' }) as string)).toEqual({
      partialSuccess: { rejectedDataPoints: '2', errorMessage: 'bad' },
    });
  });

  it('encodes google.rpc.Status with RetryInfo', () => {
    const status = encodeStatus('protobuf', 14, 'busy', 5) as Uint8Array;
    const text = Buffer.from(status).toString('latin1');
    expect(status[0]).toBe(0x08);
    expect(status[1]).toBe(14);
    expect(text).toContain('busy');
    expect(text).toContain('type.googleapis.com/google.rpc.RetryInfo');
    expect(JSON.parse(encodeStatus('json', 3, 'bad payload') as string)).toEqual({ code: 3, message: 'bad payload', details: [] });
    expect(JSON.parse(encodeStatus('json', 14, 'busy', 5) as string).details[0].retryDelay).toBe('5s');
  });
});
