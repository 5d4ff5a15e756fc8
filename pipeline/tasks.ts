/**
 * What a pipeline worker thread does with one request: decompress with the cap, decode,
 * build RowBinary rows. Runs in the piscina pool, never on the event loop. Errors cross the
 * thread boundary as plain data (a structured clone drops an Error's class and fields).
 */
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { toSluiceError, type ErrorCode } from '../core/errors.ts';
import { decompress, decompressesSync, decompressSync, newInflaters, type ContentEncoding } from './decompress.ts';
import type { Signal, TableRows } from './otlp/index.ts';
import { offerSpares } from '../storage/table-rows.ts';
import { otlpTranscoder, type TranscoderSetting } from './wasm/select.ts';
import type { Fallback } from './wasm/transcoder.ts';
import { transcodeAgent } from './agent/rows.ts';
import type { AgentKind } from './agent/schemas.ts';

export interface OtlpTask {
  kind: 'otlp';
  signal: Signal;
  format: 'protobuf' | 'json';
  encoding: ContentEncoding;
  /** The request body; its buffer is transferred to the worker, not copied. */
  body: Uint8Array;
  sourceId: string;
  maxBytes: number;
  /** Cut each table's rows into chunks of about this many bytes (a bus message each). */
  maxChunkBytes: number;
  /** Which transcoder (SLUICE_TRANSCODER; the pool sets it); JavaScript when absent. */
  transcoder?: TranscoderSetting;
}

/** An agent API request: JSON of one of the agent payload kinds. */
export interface AgentTask {
  kind: 'agent';
  payload: AgentKind;
  encoding: ContentEncoding;
  body: Uint8Array;
  sourceId: string;
  maxBytes: number;
  maxChunkBytes: number;
  /** When the gateway received the request, epoch nanoseconds as a decimal string. */
  receivedAt: string;
}

export type PipelineTask = (OtlpTask | AgentTask) & {
  /** Buffers of earlier rows, sent back for this thread to write rows into (pool.ts). */
  spares?: ArrayBuffer[];
};

/** Requests sent to a thread in one message (pool.ts): run one after the other, answered in order. */
export interface BatchTask {
  kind: 'batch';
  tasks: PipelineTask[];
}

export interface TaskSuccess {
  ok: true;
  tables: TableRows[];
  accepted: number;
  rejected: number;
  rejectMessage?: string;
  /** The WebAssembly transcoder could not serve the request; JavaScript did (select.ts). */
  fallback?: Fallback;
}

export interface TaskFailure {
  ok: false;
  code: ErrorCode;
  message: string;
  /** For logs only: what went wrong inside an internal error. */
  detail?: string;
  fallback?: Fallback;
}

export type TaskResult = TaskSuccess | TaskFailure;

/**
 * This thread's gzip and zstd inflaters: their buffers are reused by every request, so a body
 * inflated into one must be used up before the next. It is: a thread holds two tasks at most
 * (pool.ts; a task may be a batch, whose requests run one after the other) but JavaScript runs
 * one at a time, a body is inflated and transcoded without an
 * await in between (only zstd on a Node without its own awaits, and it decompresses into a
 * buffer of its own), and the rows are copies (nothing of the result points into the body).
 * The row writers are reused the same way.
 */
const inflaters = newInflaters();

export async function runTask(task: PipelineTask | BatchTask): Promise<unknown> {
  const results: TaskResult[] = [];
  for (const one of task.kind === 'batch' ? task.tasks : [task]) results.push(await runOne(one));
  const value = task.kind === 'batch' ? results : results[0];
  // The row buffers move back to the main thread without a copy.
  return move({
    get [transferableSymbol]() { return results.flatMap((result) => (result.ok ? result.tables.map((t) => t.data.buffer) : [])); },
    get [valueSymbol]() { return value; },
  });
}

async function runOne(task: PipelineTask): Promise<TaskResult> {
  if (task.spares) offerSpares(task.spares);
  const otlp = task.kind === 'otlp' ? otlpTranscoder(task.transcoder ?? 'js') : undefined;
  try {
    // Here, synchronously; only zstd on a Node without its own goes to libuv's pool (awaited).
    const body = decompressesSync(task.encoding, inflaters)
      ? decompressSync(task.encoding, task.body, task.maxBytes, inflaters)
      : await decompress(task.encoding, task.body, task.maxBytes, inflaters);
    const rows = task.kind === 'otlp'
      ? otlp!.transcode(task.signal, task.format, body, task.sourceId, task.maxChunkBytes)
      : transcodeAgent(task.payload, body, task.sourceId, task.maxChunkBytes, BigInt(task.receivedAt));
    const result: TaskSuccess = { ok: true, ...rows };
    const fallback = otlp?.takeFallback();
    if (fallback) result.fallback = fallback;
    return result;
  } catch (err) {
    const error = toSluiceError(err);
    const failure: TaskFailure = { ok: false, code: error.code, message: error.message };
    if (error.code === 'internal') failure.detail = String((error.cause as Error)?.stack ?? error.cause);
    const fallback = otlp?.takeFallback();
    if (fallback) failure.fallback = fallback;
    return failure;
  }
}
