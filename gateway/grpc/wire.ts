/**
 * gRPC over HTTP/2, the parts a unary server needs (grpc/grpc doc/PROTOCOL-HTTP2.md): the
 * request's timeout and encoding headers, the 5-byte prefix of a message (a compressed flag and
 * a big-endian length), and a status as trailers.
 */
import type { OutgoingHttpHeaders } from 'node:http2';
import { GrpcCode } from '../../core/errors.ts';
import type { ContentEncoding } from '../../pipeline/decompress.ts';
import { encodeStatus } from '../otlp-response.ts';

/** A call's outcome as the client sees it; RetryInfo goes along when retryAfterSeconds is set. */
export interface GrpcStatus {
  code: number;
  message: string;
  retryAfterSeconds?: number;
}

/** Compressed flag (1 byte) and message length (4 bytes, big-endian). */
export const PREFIX_BYTES = 5;

/** Message encodings the worker pool inflates (under the same cap as HTTP bodies). */
const ENCODINGS: readonly ContentEncoding[] = ['identity', 'gzip', 'zstd'];

/** grpc-accept-encoding: what a client may send. */
export const ACCEPTED_ENCODINGS = ENCODINGS.join(',');

/** The `status` label of the requests metric: the code's name, as grpc-js named them. */
export const CODE_NAMES: Readonly<Record<number, string>> = Object.fromEntries(Object.entries(GrpcCode).map(([name, code]) => [code, name]));

const TIMEOUT_UNIT_MS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };

/** grpc-timeout ("100m", "5S": at most 8 digits and a unit) in milliseconds; undefined when absent or malformed. */
export function parseTimeout(header: string | undefined): number | undefined {
  const match = header?.match(/^(\d{1,8})([HMSmun])$/);
  return match ? Number(match[1]) * TIMEOUT_UNIT_MS[match[2]!]! : undefined;
}

/** grpc-encoding, absent meaning identity; undefined for one the worker pool cannot inflate. */
export function messageEncoding(header: string | undefined): ContentEncoding | undefined {
  return ENCODINGS.find((encoding) => encoding === (header ?? 'identity'));
}

/** The one message of a response: uncompressed, prefixed with its length. */
export function framed(message: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(PREFIX_BYTES + message.byteLength);
  frame.writeUInt8(0, 0);
  frame.writeUInt32BE(message.byteLength, 1);
  frame.set(message, PREFIX_BYTES);
  return frame;
}

/** grpc-status, grpc-message and, for a status with a retry delay, grpc-status-details-bin (a google.rpc.Status with RetryInfo). */
export function statusTrailers(status: GrpcStatus): OutgoingHttpHeaders {
  const trailers: OutgoingHttpHeaders = { 'grpc-status': String(status.code) };
  if (status.message) trailers['grpc-message'] = percentEncoded(status.message);
  if (status.retryAfterSeconds !== undefined) {
    const details = encodeStatus('protobuf', status.code, status.message, status.retryAfterSeconds) as Uint8Array;
    // Binary metadata is base64, sent unpadded.
    trailers['grpc-status-details-bin'] = Buffer.from(details).toString('base64').replace(/=+$/, '');
  }
  return trailers;
}

/** UTF-8, each byte outside space..'~' (and '%' itself) as %XX. */
export function percentEncoded(message: string): string {
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
