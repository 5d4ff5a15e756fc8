import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { ApiError, ERROR_CODES, GrpcCode, SluiceError, toSluiceError } from './errors.ts';

describe('errors', () => {
  it('documents every error code in docs/reference/http-api.md', async () => {
    const reference = await readFile(new URL('../docs/reference/http-api.md', import.meta.url), 'utf8');
    for (const [code, spec] of Object.entries(ERROR_CODES)) {
      const row = `| \`${code}\` | ${spec.http} | ${spec.grpc} | ${spec.retryable ? 'yes' : 'no'} | ${spec.doc} |`;
      expect(reference, code).toContain(row);
    }
  });

  it('maps unknown throwables to internal errors and keeps SluiceErrors as they are', () => {
    const cause = new TypeError('boom');
    const internal = toSluiceError(cause);
    expect(internal.code).toBe('internal');
    expect(internal.httpStatus).toBe(500);
    expect(internal.cause).toBe(cause);
    const limited = new SluiceError('rate_limited', 'slow down', { retryAfterSeconds: 3 });
    expect(toSluiceError(limited)).toBe(limited);
    expect(limited.httpStatus).toBe(429);
    expect(limited.retryable).toBe(true);
  });

  it('makes a JSON API\'s error one of the family: its status names its code, and gRPC reads the same registry', () => {
    const taken = new ApiError(409, 'That name is taken', { field: 'name' });
    expect(taken).toBeInstanceOf(SluiceError);
    expect([taken.code, taken.httpStatus, taken.grpcCode, taken.retryable]).toEqual(['conflict', 409, GrpcCode.ABORTED, false]);
    expect(toSluiceError(taken)).toBe(taken);
    const busy = new ApiError(503, 'Service temporarily unavailable', { retryAfterSeconds: 7 });
    expect([busy.code, busy.retryAfterSeconds, busy.retryable]).toEqual(['unavailable', 7, true]);
    // Every registered status makes an error of its own code.
    for (const [code, spec] of Object.entries(ERROR_CODES)) expect(new ApiError(spec.http, 'x').code).toBe(code);
  });
});
