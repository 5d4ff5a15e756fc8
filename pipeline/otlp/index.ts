/**
 * The OTLP transcoder: an export request (protobuf or OTLP/JSON) in, ClickHouse RowBinary
 * rows per table out. Protobuf is walked in place and written to rows without an object per
 * item (traces.ts, logs.ts, metrics.ts); JSON is first turned into the same protobuf bytes
 * (json.ts), so both take one code path. Runs in a worker thread: it is all CPU.
 */
import { otlpJsonToProtobuf } from './json.ts';
import { transcodeLogs } from './logs.ts';
import { transcodeMetrics } from './metrics.ts';
import { transcodeTraces } from './traces.ts';
import type { Signal } from './signal.ts';
import type { TranscodeResult } from '../../storage/table-rows.ts';

export type { TableRows, TranscodeResult } from '../../storage/table-rows.ts';
export type { TableName } from '../../storage/schema.ts';

export type { Signal } from './signal.ts';

const TRANSCODERS: Record<Signal, (body: Uint8Array, sourceId: string, maxChunkBytes?: number) => TranscodeResult> = {
  traces: transcodeTraces,
  logs: transcodeLogs,
  metrics: transcodeMetrics,
};

/**
 * Transcodes one export request. `accepted` and `rejected` count spans, log records or
 * metric data points; a refused item (e.g. a span whose trace_id is not 16 bytes) is left
 * out and counted, the rest stored. Throws badRequest for a request that cannot be decoded
 * (truncated or garbage protobuf, malformed JSON, invalid UTF-8), or whose rows for one table
 * span more partitions (days) than MAX_REQUEST_PARTITIONS (storage/schema.ts). An empty body or `{}`
 * gives no tables. With `maxChunkBytes`, a table's rows come in several chunks of about that
 * size, cut between rows (so each fits one bus message).
 */
export function transcodeOtlp(
  signal: Signal,
  format: 'protobuf' | 'json',
  body: Uint8Array,
  sourceId: string,
  maxChunkBytes = Infinity,
): TranscodeResult {
  const protobuf = format === 'json' ? otlpJsonToProtobuf(signal, body) : body;
  return transcodeProtobuf(signal, protobuf, sourceId, maxChunkBytes);
}

/** transcodeOtlp of a protobuf request. */
export function transcodeProtobuf(signal: Signal, body: Uint8Array, sourceId: string, maxChunkBytes = Infinity): TranscodeResult {
  return TRANSCODERS[signal](body, sourceId, maxChunkBytes);
}
