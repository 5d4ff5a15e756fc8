/**
 * The few response messages the gateway writes, encoded by hand (they are tiny):
 * Export*ServiceResponse with partial_success, google.rpc.Status, google.rpc.RetryInfo.
 * Both protobuf and the OTLP/JSON mapping.
 */
import type { Signal } from '../core/metrics.ts';

/** The count field of partial_success per signal (OTLP/JSON names). */
export const REJECTED_FIELD: Record<Signal, string> = {
  traces: 'rejectedSpans',
  logs: 'rejectedLogRecords',
  metrics: 'rejectedDataPoints',
};

const RETRY_INFO_TYPE = 'type.googleapis.com/google.rpc.RetryInfo';

/** Minimal protobuf writer for the messages above. */
class ProtoWriter {
  private readonly bytes: number[] = [];

  varint(field: number, value: number): this {
    this.tag(field, 0).raw(value);
    return this;
  }

  bytesField(field: number, value: Uint8Array): this {
    this.tag(field, 2).raw(value.length);
    for (const b of value) this.bytes.push(b);
    return this;
  }

  string(field: number, value: string): this {
    return value ? this.bytesField(field, Buffer.from(value, 'utf8')) : this;
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }

  private tag(field: number, wireType: number): this {
    return this.raw(field * 8 + wireType);
  }

  private raw(value: number): this {
    // Non-negative values only (counts, codes, lengths): no 64-bit sign extension needed.
    while (value > 0x7f) {
      this.bytes.push((value % 128) | 0x80);
      value = Math.floor(value / 128);
    }
    this.bytes.push(value);
    return this;
  }
}

export interface PartialSuccess {
  rejected: number;
  message?: string;
}

/** Export{Trace,Logs,Metrics}ServiceResponse. An empty message means full success. */
export function encodeExportResponse(signal: Signal, format: 'protobuf' | 'json', partial?: PartialSuccess): Uint8Array | string {
  const hasPartial = partial !== undefined && (partial.rejected > 0 || !!partial.message);
  if (format === 'json') {
    if (!hasPartial) return '{}';
    // int64 is a string in the protobuf JSON mapping.
    return JSON.stringify({ partialSuccess: { [REJECTED_FIELD[signal]]: String(partial.rejected), errorMessage: partial.message ?? '' } });
  }
  if (!hasPartial) return new Uint8Array(0);
  const inner = new ProtoWriter().varint(1, partial.rejected).string(2, partial.message ?? '').finish();
  return new ProtoWriter().bytesField(1, inner).finish();
}

/** google.rpc.Status, with a RetryInfo detail when the client should come back later. */
export function encodeStatus(format: 'protobuf' | 'json', code: number, message: string, retryAfterSeconds?: number): Uint8Array | string {
  if (format === 'json') {
    const details = retryAfterSeconds ? [{ '@type': RETRY_INFO_TYPE, retryDelay: `${retryAfterSeconds}s` }] : [];
    return JSON.stringify({ code, message, details });
  }
  const writer = new ProtoWriter().varint(1, code).string(2, message);
  if (retryAfterSeconds) {
    const duration = new ProtoWriter().varint(1, retryAfterSeconds).finish();
    const retryInfo = new ProtoWriter().bytesField(1, duration).finish();
    writer.bytesField(3, new ProtoWriter().string(1, RETRY_INFO_TYPE).bytesField(2, retryInfo).finish());
  }
  return writer.finish();
}
