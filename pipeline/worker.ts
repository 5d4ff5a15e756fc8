// Entry point of a pipeline worker thread, bundled with what it imports into one JavaScript
// file when a pool starts (core/worker-bundle.ts).
import { otlpTranscoder, type TranscoderSetting, type TranscoderStatus } from './wasm/select.ts';

export { runTask as default } from './tasks.ts';

/**
 * Named task used by the pool to start each thread ahead of traffic: loads the OTLP transcoder
 * the pool runs (so the first request does not compile the WebAssembly module) and says which
 * one this thread runs.
 */
export function warm(setting: TranscoderSetting | null): TranscoderStatus {
  return otlpTranscoder(setting ?? 'js').status;
}
