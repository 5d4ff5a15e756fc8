/**
 * The WebAssembly transcoder's loader: pipeline/wasm/transcoder.wasm (built from src/*.c by
 * build.sh) run in this thread, giving what pipeline/otlp's JavaScript transcoder gives for the
 * same protobuf request — the same RowBinary bytes, chunks, counts and refusals (the property
 * tests in transcoder.test.ts hold it to that).
 *
 * A call: the body and the source id are copied into the module's memory, the module walks them
 * and hands each chunk of rows to emit_chunk, which copies it out into a buffer of its own (a
 * spare if one fits, as the JavaScript does). The module never reads or writes outside its own
 * memory, and that memory has a hard maximum (MAX_MEMORY_BYTES).
 *
 * What can go wrong inside, and what happens:
 * - the request is refused (malformed, invalid UTF-8, ...): the module notes why and ends the
 *   call with a trap; the refusal is thrown as the JavaScript throws it (badRequest), and the
 *   instance's stack pointer is put back, so the instance goes on serving;
 * - the module needs more memory than its maximum: it ends the call with a trap after noting
 *   it; the caller gets a fallback (`out_of_memory`) and serves the request with JavaScript;
 * - any other trap is a bug in the module (an out-of-bounds access, `unreachable`, a stack
 *   overflow): the caller gets a fallback (`trap`) and the instance is replaced, its memory
 *   being in an unknown state.
 * A trap is an exception here only if V8 checks the bounds of memory accesses itself: with its
 * trap handler (the default on x64) an out-of-bounds access is a SIGSEGV, and once chDB has
 * taken and given back the process's signal handlers (storage/chdb-session.ts) nobody turns it
 * into an exception: the process dies. Sluice therefore runs with --disable-wasm-trap-handler
 * (bin/node-flags.ts), and the pool uses this module only then (select.ts).
 */
import { readFileSync } from 'node:fs';
import { badRequest } from '../../core/errors.ts';
import { MAX_REQUEST_PARTITIONS, PARTITIONS, TABLE_COLUMNS, type TableName } from '../../storage/schema.ts';
import { MAX_ANYVALUE_DEPTH } from '../otlp/anyvalue-json.ts';
import type { Signal } from '../otlp/index.ts';
import { ownRows, tooManyPartitions, type TableRows, type TranscodeResult } from '../../storage/table-rows.ts';

/** The module: built from src/ by build.sh, committed. */
export const WASM_FILE = new URL('./transcoder.wasm', import.meta.url);

const PAGE_BYTES = 65536;
/** The module's memory at the start: its stack (1 MiB) and data, and room for small requests (build.sh: --initial-memory). */
const INITIAL_PAGES = 32;
/** The most memory an instance may have (build.sh: MAX_MEMORY); a request that needs more is served by JavaScript. */
export const MAX_MEMORY_BYTES = 256 * 1024 * 1024;
/** An instance whose memory grew past this for one large request is replaced after it, so the memory goes back. */
const KEEP_MEMORY_BYTES = 64 * 1024 * 1024;

/** The tables the module writes, by the number it gives them (sluice.h#Table). */
const TABLES: readonly TableName[] = [
  'otel_traces', 'otel_logs', 'otel_metrics_gauge', 'otel_metrics_sum', 'otel_metrics_histogram',
  'otel_metrics_exp_histogram', 'otel_metrics_summary',
];
const SIGNALS: Record<Signal, number> = { traces: 0, logs: 1, metrics: 2 };

/** sluice.h#Status */
const DONE = 1;
const REFUSED = 2;
const OUT_OF_MEMORY = 3;
const TOO_MANY_PARTITIONS = 4;

/**
 * Why a request went to the JavaScript transcoder instead: the module trapped (a bug), needed
 * more memory than its maximum, or did not load in this thread though SLUICE_TRANSCODER=wasm
 * asked for it (select.ts).
 */
export type FallbackReason = 'trap' | 'out_of_memory' | 'not_loaded';

export interface Fallback {
  fallback: FallbackReason;
  /** What happened, for the log (the trap's message). */
  detail: string;
}

interface Exports {
  prepare(bodyBytes: number, sourceBytes: number): number;
  transcode(signal: number, maxChunkBytes: number): number;
  contract(): number;
  contract_length(): number;
  result(): number;
  __stack_pointer: WebAssembly.Global;
}

/** One instance and its memory. */
interface Instance {
  exports: Exports;
  memory: WebAssembly.Memory;
  /** The stack pointer between calls. */
  stackPointer: number;
  /** Where the module keeps `result`. */
  resultAt: number;
}

/** The text the module must hold in contract(): the tables, columns and limits it writes rows for. */
export function expectedContract(): string {
  const tables = TABLES.map((table) => {
    const { by, column } = PARTITIONS[table]!;
    return `${table}: ${TABLE_COLUMNS[table].join(' ')}; by ${by} of ${column}\n`;
  });
  return `${tables.join('')}partitions per table: ${MAX_REQUEST_PARTITIONS}\nattribute value depth: ${MAX_ANYVALUE_DEPTH}\n`;
}

let compiled: WebAssembly.Module | undefined;

/** The committed module, compiled once per thread. */
export function transcoderModule(): WebAssembly.Module {
  compiled ??= new WebAssembly.Module(readFileSync(WASM_FILE));
  return compiled;
}

export class WasmTranscoder {
  private instance: Instance;
  /** Instances made since this one was (after a trap, after a request that grew the memory). */
  replaced = 0;
  /** The chunks of the call under way, as emit_chunk hands them over. */
  private chunks: Array<{ table: number; rows: number; data: Uint8Array }> = [];
  /** An error thrown by emit_chunk itself (in JavaScript), to be rethrown as it is. */
  private importError: unknown;
  private sourceId = '';
  private sourceBytes: Uint8Array = new Uint8Array(0);

  private readonly maxMemoryBytes: number;
  private readonly keepMemoryBytes: number;

  /**
   * Instantiates `module` (default: the committed one); throws if it cannot be instantiated or
   * was built for another schema. Options (tests): the memory's maximum (MAX_MEMORY_BYTES, at
   * most that) and the size past which an instance is replaced after a call (KEEP_MEMORY_BYTES).
   */
  constructor(private readonly module: WebAssembly.Module = transcoderModule(), options: { maxMemoryBytes?: number; keepMemoryBytes?: number } = {}) {
    this.maxMemoryBytes = options.maxMemoryBytes ?? MAX_MEMORY_BYTES;
    this.keepMemoryBytes = options.keepMemoryBytes ?? KEEP_MEMORY_BYTES;
    this.instance = this.instantiate();
    const contract = this.readContract();
    if (contract !== expectedContract()) {
      throw new Error('pipeline/wasm/transcoder.wasm was built for other tables or limits than storage/schema.ts: rebuild it (npm run build:wasm)');
    }
  }

  private instantiate(): Instance {
    const memory = new WebAssembly.Memory({ initial: INITIAL_PAGES, maximum: this.maxMemoryBytes / PAGE_BYTES });
    const env = {
      memory,
      emit_chunk: (table: number, rows: number, at: number, length: number) => {
        try {
          this.chunks.push({ table, rows, data: ownRows(new Uint8Array(memory.buffer, at, length)) });
        } catch (err) {
          this.importError = err;
          throw err;
        }
      },
    };
    const exports = new WebAssembly.Instance(this.module, { env }).exports as unknown as Exports;
    return { exports, memory, stackPointer: exports.__stack_pointer.value as number, resultAt: exports.result() };
  }

  private readContract(): string {
    const { exports, memory } = this.instance;
    return Buffer.from(memory.buffer, exports.contract(), exports.contract_length()).toString('latin1');
  }

  /** The bytes the instance's memory has now (it grows, it never shrinks). */
  get memoryBytes(): number {
    return this.instance.memory.buffer.byteLength;
  }

  /**
   * Transcodes one protobuf export request, as pipeline/otlp's transcodeTraces, transcodeLogs or
   * transcodeMetrics would: the same result, or the same badRequest thrown. A Fallback means
   * the module could not (see the file's comment): the caller serves the request with those.
   */
  transcode(signal: Signal, body: Uint8Array, sourceId: string, maxChunkBytes = Infinity): TranscodeResult | Fallback {
    if (sourceId !== this.sourceId) {
      this.sourceId = sourceId;
      this.sourceBytes = Buffer.from(sourceId, 'utf8');
    }
    const source = this.sourceBytes;
    const { exports, memory } = this.instance;
    this.chunks = [];
    this.importError = undefined;
    try {
      let resultAt: number;
      try {
        const at = exports.prepare(body.byteLength, source.byteLength);
        const heap = new Uint8Array(memory.buffer);
        heap.set(body, at);
        heap.set(source, at + body.byteLength);
        resultAt = exports.transcode(SIGNALS[signal], maxChunkBytes);
      } catch (err) {
        return this.ended(err);
      }
      return this.result(resultAt);
    } finally {
      this.chunks = [];
      if (this.memoryBytes > this.keepMemoryBytes) this.replace();
    }
  }

  /** A call that ended in an exception: a refusal (thrown on), or a fallback. */
  private ended(err: unknown): Fallback {
    const { exports, memory, stackPointer, resultAt } = this.instance;
    if (this.importError !== undefined) {
      this.replace();
      throw this.importError;
    }
    const [status, , , message, length] = new Uint32Array(memory.buffer, resultAt, 5);
    if (status === REFUSED) {
      // The trap left the stack pointer where the refusal was: put it back for the next call.
      exports.__stack_pointer.value = stackPointer;
      throw badRequest(Buffer.from(memory.buffer, message, length).toString('utf8'));
    }
    this.replace();
    if (status === OUT_OF_MEMORY) return { fallback: 'out_of_memory', detail: `the request needed more than the module's ${this.maxMemoryBytes / 1024 / 1024} MiB of memory` };
    return { fallback: 'trap', detail: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
  }

  /** The outcome of a call that returned: `result` (sluice.h#Result) read, the chunks put in table order. */
  private result(at: number): TranscodeResult {
    const buffer = this.instance.memory.buffer;
    const [status, accepted, rejected, message, messageLength, tableCount, ...rest] = new Uint32Array(buffer, at, 16);
    if (status === TOO_MANY_PARTITIONS) throw tooManyPartitions(TABLES[rest[8]!]!, rest[9]!);
    if (status !== DONE) throw new Error(`the WebAssembly transcoder returned with status ${status}`);
    const tables: TableRows[] = [];
    for (const table of rest.slice(0, tableCount)) {
      const name = TABLES[table]!;
      for (const chunk of this.chunks) {
        if (chunk.table === table) tables.push({ table: name, columns: TABLE_COLUMNS[name], rows: chunk.rows, data: chunk.data });
      }
    }
    const result: TranscodeResult = { tables, accepted: accepted!, rejected: rejected! };
    if (messageLength! > 0) result.rejectMessage = Buffer.from(buffer, message, messageLength).toString('utf8');
    return result;
  }

  /** A fresh instance in place of this one (after a trap, or to give back memory). */
  private replace(): void {
    this.instance = this.instantiate();
    this.replaced++;
  }
}

/** Whether a transcode gave a fallback rather than a result. */
export function isFallback(outcome: TranscodeResult | Fallback): outcome is Fallback {
  return 'fallback' in outcome;
}
