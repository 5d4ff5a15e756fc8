import { describe, expect, it } from 'vitest';
import { GrpcCode } from '../../core/errors.ts';
import { framed, messageEncoding, parseTimeout, percentEncoded, statusTrailers } from './wire.ts';

describe('gRPC wire format', () => {
  it('reads grpc-timeout in every unit, and nothing from a malformed one', () => {
    expect(parseTimeout('2H')).toBe(7_200_000);
    expect(parseTimeout('3M')).toBe(180_000);
    expect(parseTimeout('10S')).toBe(10_000);
    expect(parseTimeout('250m')).toBe(250);
    expect(parseTimeout('1500u')).toBe(1.5);
    expect(parseTimeout('99999999n')).toBeCloseTo(99.999999);
    for (const bad of [undefined, '', '10', 'S', '123456789S', '1.5S', '-1S', '10s ']) expect(parseTimeout(bad), String(bad)).toBeUndefined();
  });

  it('takes the encodings the worker pool inflates, identity when absent', () => {
    expect(messageEncoding(undefined)).toBe('identity');
    expect(messageEncoding('gzip')).toBe('gzip');
    expect(messageEncoding('zstd')).toBe('zstd');
    expect(messageEncoding('deflate')).toBeUndefined();
    expect(messageEncoding('snappy')).toBeUndefined();
  });

  it('percent-encodes grpc-message as UTF-8 outside space..~ and % itself', () => {
    expect(percentEncoded('plain text: ok (1/2)')).toBe('plain text: ok (1/2)');
    expect(percentEncoded('100% é\n')).toBe('100%25 %C3%A9%0A');
  });

  it('frames a message behind its 5-byte prefix', () => {
    expect([...framed(new Uint8Array([7, 8, 9]))]).toEqual([0, 0, 0, 0, 3, 7, 8, 9]);
  });

  it('puts RetryInfo in grpc-status-details-bin, unpadded base64, only when there is a delay', () => {
    expect(statusTrailers({ code: GrpcCode.OK, message: '' })).toEqual({ 'grpc-status': '0' });
    const trailers = statusTrailers({ code: GrpcCode.UNAVAILABLE, message: 'busy', retryAfterSeconds: 5 });
    expect(trailers['grpc-status']).toBe('14');
    expect(trailers['grpc-message']).toBe('busy');
    const details = String(trailers['grpc-status-details-bin']);
    expect(details).not.toMatch(/=$/);
    expect(Buffer.from(details, 'base64').toString('latin1')).toContain('type.googleapis.com/google.rpc.RetryInfo');
  });
});
