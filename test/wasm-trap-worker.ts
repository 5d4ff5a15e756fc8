// The worker thread of test/wasm-trap-child.ts: the WebAssembly transcoder on one request, with
// no check of Node's flags (pipeline/wasm/select.ts would run JavaScript without
// --disable-wasm-trap-handler), to show what a trap does either way.
import { transcodeOtlp } from '../pipeline/otlp/index.ts';
import { encodeRequest } from './otlp-requests.ts';
import { isFallback, WasmTranscoder } from '../pipeline/wasm/transcoder.ts';

export function warm(): boolean {
  return true;
}

export default function run(): unknown {
  const body = encodeRequest('traces', { resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: Buffer.alloc(16, 1), spanId: Buffer.alloc(8, 2), name: 's' }] }] }] });
  const transcoder = new WasmTranscoder();
  const first = transcoder.transcode('traces', body, 'src');
  const second = transcoder.transcode('traces', body, 'src');
  const rows = (result: { tables: Array<{ data: Uint8Array }> }) => Buffer.concat(result.tables.map((t) => t.data)).toString('hex');
  return {
    first: isFallback(first) ? first.fallback : 'rows',
    replaced: transcoder.replaced,
    second: isFallback(second) ? second.fallback : rows(second) === rows(transcodeOtlp('traces', 'protobuf', body, 'src')) ? 'the same rows as JavaScript' : 'other rows',
  };
}
