/**
 * Which OTLP transcoder a worker thread runs, as SLUICE_TRANSCODER says:
 *   auto  the WebAssembly one where it loads and where its traps are exceptions, else JavaScript
 *   wasm  the WebAssembly one (the pool does not start where it cannot run it)
 *   js    the JavaScript one (pipeline/otlp), the reference
 * Both give the same rows and refusals for every request (transcoder.fuzz.test.ts). A request
 * the WebAssembly module could not serve (it trapped, or needed more memory than its maximum)
 * is served by JavaScript, and the thread reports it (a Fallback) for the main thread to log
 * and count.
 *
 * Traps are exceptions only when Node runs with --disable-wasm-trap-handler (transcoder.ts says
 * why: with chDB in the process, an out-of-bounds access would otherwise end it). Every way of
 * starting Sluice passes it (bin/node-flags.ts); a process started without it runs JavaScript.
 */
import { otlpJsonToProtobuf } from '../otlp/json.ts';
import { transcodeProtobuf, type Signal } from '../otlp/index.ts';
import type { TranscodeResult } from '../../storage/table-rows.ts';
import { isFallback, WasmTranscoder, type Fallback } from './transcoder.ts';

export const TRANSCODER_SETTINGS = ['auto', 'wasm', 'js'] as const;
export type TranscoderSetting = (typeof TRANSCODER_SETTINGS)[number];

/** What a thread runs, and why not WebAssembly when it does not. */
export interface TranscoderStatus {
  transcoder: 'wasm' | 'js';
  problem?: string;
}

/** Node's flag that makes V8 check WebAssembly memory accesses itself, so that a trap is an exception. */
export const WASM_TRAP_FLAG = '--disable-wasm-trap-handler';

/** Whether this process runs with WASM_TRAP_FLAG (on its command line or in NODE_OPTIONS). */
export function wasmTrapsAreExceptions(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): boolean {
  return execArgv.includes(WASM_TRAP_FLAG) || nodeOptions.split(/\s+/).includes(WASM_TRAP_FLAG);
}

export class OtlpTranscoder {
  readonly status: TranscoderStatus;
  private readonly wasm: WasmTranscoder | undefined;
  private fallback: Fallback | undefined;

  /**
   * @param load makes the WebAssembly transcoder (tests give another module)
   * @param trapsAreExceptions whether a trap is an exception here (wasmTrapsAreExceptions())
   */
  constructor(readonly setting: TranscoderSetting, load: () => WasmTranscoder = () => new WasmTranscoder(), trapsAreExceptions = wasmTrapsAreExceptions()) {
    if (setting === 'js') {
      this.status = { transcoder: 'js' };
      return;
    }
    if (!trapsAreExceptions) {
      this.status = { transcoder: 'js', problem: `Node runs without ${WASM_TRAP_FLAG}, so a trap in the module could end the process (start Sluice with bin/node-flags.ts's flags)` };
      return;
    }
    try {
      this.wasm = load();
      this.status = { transcoder: 'wasm' };
    } catch (err) {
      this.status = { transcoder: 'js', problem: `the WebAssembly transcoder did not load: ${(err as Error).message}` };
    }
  }

  /** An OTLP request (OTLP/JSON turned into protobuf first) to rows, as pipeline/otlp's transcodeOtlp. */
  transcode(signal: Signal, format: 'protobuf' | 'json', body: Uint8Array, sourceId: string, maxChunkBytes = Infinity): TranscodeResult {
    this.fallback = undefined;
    const protobuf = format === 'json' ? otlpJsonToProtobuf(signal, body) : body;
    if (this.wasm) {
      const outcome = this.wasm.transcode(signal, protobuf, sourceId, maxChunkBytes);
      if (!isFallback(outcome)) return outcome;
      this.fallback = outcome;
    } else if (this.setting === 'wasm') {
      // Asked for and not there: every request says so, none is refused for it.
      this.fallback = { fallback: 'not_loaded', detail: this.status.problem! };
    }
    return transcodeProtobuf(signal, protobuf, sourceId, maxChunkBytes);
  }

  /** The fallback of the last transcode, if it had one (then forgotten). */
  takeFallback(): Fallback | undefined {
    const fallback = this.fallback;
    this.fallback = undefined;
    return fallback;
  }

  /** Instances of the module made since the first (after traps and large requests). */
  get replacedInstances(): number {
    return this.wasm?.replaced ?? 0;
  }
}

const transcoders = new Map<TranscoderSetting, OtlpTranscoder>();

/** This thread's transcoder for `setting`, made on first use. */
export function otlpTranscoder(setting: TranscoderSetting): OtlpTranscoder {
  let transcoder = transcoders.get(setting);
  if (!transcoder) transcoders.set(setting, (transcoder = new OtlpTranscoder(setting)));
  return transcoder;
}
