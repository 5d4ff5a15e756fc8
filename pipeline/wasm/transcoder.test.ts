/**
 * The loader's safety (pipeline/wasm/transcoder.ts): the module's memory has a hard maximum; a
 * request that needs more, and a trap, give a fallback (the caller serves the request with
 * JavaScript) and a fresh instance; a refusal ends in a trap too, and leaves the instance fit
 * for the next request; an instance whose memory grew for one large request is replaced, so the
 * memory goes back; a module built for other tables is not used. The trap in a worker thread of
 * a process that loaded chDB: test/wasm-traps.test.ts.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import { transcodeOtlp } from '../otlp/index.ts';
import { attrs, encodeRequest } from '../../test/otlp-requests.ts';
import { isFallback, MAX_MEMORY_BYTES, WASM_FILE, WasmTranscoder, type Fallback } from './transcoder.ts';

const ids = { traceId: Buffer.alloc(16, 7), spanId: Buffer.alloc(8, 9) };

/** A request of `spans` spans, each with `attributeBytes` bytes of attribute values. */
function traces(spans: number, attributeBytes = 10): Uint8Array {
  const attributes = attrs({ 'service.name': 'svc', big: 'x'.repeat(attributeBytes) });
  return encodeRequest('traces', { resourceSpans: [{ resource: { attributes }, scopeSpans: [{ spans: Array.from({ length: spans }, (_, i) => ({ ...ids, name: `span ${i}`, startTimeUnixNano: String(1_700_000_000_000_000_000n + BigInt(i)), attributes })) }] }] });
}

const rowsOf = (result: { tables: Array<{ data: Uint8Array }> }) => Buffer.concat(result.tables.map((t) => t.data));

/** The module's stack pointer, which a bug could leave anywhere: at 0, the next call's first stack frame is out of bounds. */
function breakStackPointer(transcoder: WasmTranscoder): void {
  (transcoder['instance'].exports.__stack_pointer as WebAssembly.Global).value = 0;
}

describe('WasmTranscoder', () => {
  it('survives a trap: a fallback for that request, a new instance, and the next request served by the module', () => {
    const transcoder = new WasmTranscoder();
    const body = traces(3);
    breakStackPointer(transcoder);
    const outcome = transcoder.transcode('traces', body, 'src');
    expect(isFallback(outcome)).toBe(true);
    expect((outcome as Fallback).fallback).toBe('trap');
    expect((outcome as Fallback).detail).toMatch(/^RuntimeError: memory access out of bounds/);
    expect(transcoder.replaced).toBe(1);

    const next = transcoder.transcode('traces', body, 'src');
    expect(isFallback(next)).toBe(false);
    expect(rowsOf(next as ReturnType<typeof transcodeOtlp>).equals(rowsOf(transcodeOtlp('traces', 'protobuf', body, 'src')))).toBe(true);
    expect(transcoder.replaced).toBe(1);
  });

  it('refuses a request as the JavaScript does, and the same instance serves on after any number of refusals', () => {
    const transcoder = new WasmTranscoder();
    // Invalid UTF-8 at the bottom of a kvlist 100 levels deep: found with a hundred stack frames
    // of the module in use, each with its entry on the module's stack.
    let value: object = { stringValue: '@invalid' };
    for (let level = 0; level < 99; level++) value = { kvlistValue: { values: [{ key: 'k', value }] } };
    const bad = Buffer.from(encodeRequest('traces', { resourceSpans: [{ scopeSpans: [{ spans: [{ ...ids, attributes: [{ key: 'deep', value }] }] }] }] }));
    bad[bad.indexOf('@invalid')] = 0xff;
    const expected = (() => {
      try {
        transcodeOtlp('traces', 'protobuf', bad, 'src');
      } catch (err) {
        return err;
      }
    })();
    let refusal: unknown;
    // Each refusal ends in a trap deep in the module: the stack pointer is put back every time
    // (left where the trap was, these would use up the module's 1 MiB stack within a few hundred).
    for (let i = 0; i < 5000; i++) {
      try {
        transcoder.transcode('traces', bad, 'src');
      } catch (err) {
        refusal = err;
      }
    }
    expect(refusal).toBeInstanceOf(SluiceError);
    expect((refusal as SluiceError).code).toBe('bad_request');
    expect((refusal as SluiceError).message).toBe('invalid UTF-8 in a protobuf string field');
    expect(refusal).toEqual(expected);
    expect(transcoder.replaced).toBe(0);
    const body = traces(2);
    expect(rowsOf(transcoder.transcode('traces', body, 'src') as ReturnType<typeof transcodeOtlp>).equals(rowsOf(transcodeOtlp('traces', 'protobuf', body, 'src')))).toBe(true);
  });

  it('has a hard memory maximum: a request that needs more is a fallback, and the instance is replaced', () => {
    const maxMemoryBytes = 4 * 1024 * 1024;
    const transcoder = new WasmTranscoder(undefined, { maxMemoryBytes });
    // 1.4 MiB of request, over 3 MiB of rows (the resource's attributes go into every row):
    // more than the 4 MiB the module may have, in one chunk.
    const body = traces(100, 15_000);
    const outcome = transcoder.transcode('traces', body, 'src');
    expect(outcome).toEqual({ fallback: 'out_of_memory', detail: "the request needed more than the module's 4 MiB of memory" });
    expect(transcoder.replaced).toBe(1);
    expect(transcoder.memoryBytes).toBeLessThanOrEqual(maxMemoryBytes);
    // In chunks of 64 KiB the rows leave as they are made: the same request fits.
    const chunked = transcoder.transcode('traces', body, 'src', 64 * 1024);
    expect(isFallback(chunked)).toBe(false);
    expect(rowsOf(chunked as ReturnType<typeof transcodeOtlp>).equals(rowsOf(transcodeOtlp('traces', 'protobuf', body, 'src', 64 * 1024)))).toBe(true);
    expect(transcoder.memoryBytes).toBeLessThanOrEqual(maxMemoryBytes);
  });

  it('gives its memory back after a request that made it grow past what it keeps', () => {
    const transcoder = new WasmTranscoder(undefined, { keepMemoryBytes: 8 * 1024 * 1024 });
    const start = transcoder.memoryBytes;
    transcoder.transcode('traces', traces(10), 'src');
    expect(transcoder.memoryBytes).toBe(start);
    expect(transcoder.replaced).toBe(0);
    const result = transcoder.transcode('traces', traces(400, 20_000), 'src');
    expect(isFallback(result)).toBe(false);
    expect(transcoder.replaced).toBe(1);
    expect(transcoder.memoryBytes).toBe(start);
  });

  it('asks for a memory of at most MAX_MEMORY_BYTES (256 MiB), the maximum the module declares', () => {
    expect(MAX_MEMORY_BYTES).toBe(256 * 1024 * 1024);
    expect(() => new WasmTranscoder(undefined, { maxMemoryBytes: MAX_MEMORY_BYTES + 65536 })).toThrow(WebAssembly.LinkError);
  });

  it('is not used when built for other tables than storage/schema.ts', () => {
    const bytes = readFileSync(WASM_FILE);
    const at = bytes.indexOf('otel_logs: SourceId ServiceName');
    expect(at).toBeGreaterThan(0);
    bytes.write('otel_logs: SourceId ServiceNamf', at, 'latin1');
    expect(() => new WasmTranscoder(new WebAssembly.Module(bytes))).toThrow(/built for other tables or limits than storage\/schema\.ts: rebuild it \(npm run build:wasm\)/);
  });
});
