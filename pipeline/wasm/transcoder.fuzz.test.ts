/**
 * The WebAssembly transcoder against the JavaScript one, its reference: for every input, the same
 * RowBinary bytes in the same chunks, the same counts and rejection message, or the same refusal
 * (status and message). Inputs: the valid requests of test/otlp-arbitraries.ts (whole, and
 * cut into small chunks), those corrupted byte by byte, written with damage (padded and
 * over-long varints, wrong wire types, invalid UTF-8, wrong lengths, cut short:
 * test/otlp-hostile.ts), attribute values nested around the depth limit, more than 10,000
 * attributes, doubles of every bit pattern, random bytes. No input may make the module give up
 * (a fallback): it handles everything. Settings and replay: test/fuzz.ts (`npm run fuzz` runs
 * these far longer).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import { FUZZ_TEST_TIMEOUT_MS, fuzzParameters, mutated } from '../../test/fuzz.ts';
import { validRequest } from '../../test/otlp-arbitraries.ts';
import { damagedRequest, deeplyNested, doubleValues, manyAttributes, manyDays, metricNumbers, refusedItems } from '../../test/otlp-hostile.ts';
import { transcodeOtlp, type Signal } from '../otlp/index.ts';
import type { TranscodeResult } from '../../storage/table-rows.ts';
import { encodeRequest } from '../../test/otlp-requests.ts';
import { isFallback, WasmTranscoder } from './transcoder.ts';

const SIGNALS: Signal[] = ['traces', 'logs', 'metrics'];

const wasm = new WasmTranscoder();

/** What a transcode gave, in a form two can be compared in (row bytes as hex, per chunk). */
type Outcome =
  | { ok: true; tables: Array<{ table: string; rows: number; bytes: string }>; accepted: number; rejected: number; rejectMessage: string | undefined }
  | { ok: false; code: string; status: number; message: string };

function outcomeOf(transcode: () => TranscodeResult): Outcome {
  try {
    const { tables, accepted, rejected, rejectMessage } = transcode();
    return { ok: true, tables: tables.map(({ table, rows, data }) => ({ table, rows, bytes: Buffer.from(data).toString('hex') })), accepted, rejected, rejectMessage };
  } catch (err) {
    if (!(err instanceof SluiceError)) throw err;
    return { ok: false, code: err.code, status: err.httpStatus, message: err.message };
  }
}

/** Asserts that both transcoders give the same for `body`; returns the outcome. */
function same(signal: Signal, body: Uint8Array, maxChunkBytes = Infinity): Outcome {
  const js = outcomeOf(() => transcodeOtlp(signal, 'protobuf', body, 'source-1', maxChunkBytes));
  const module = outcomeOf(() => {
    const outcome = wasm.transcode(signal, body, 'source-1', maxChunkBytes);
    if (isFallback(outcome)) throw new Error(`the module gave up: ${outcome.fallback} (${outcome.detail})`);
    return outcome;
  });
  expect(module).toEqual(js);
  return js;
}

describe('the WebAssembly transcoder writes what the JavaScript one writes', () => {
  for (const signal of SIGNALS) {
    it(`${signal}: valid requests, whole and in chunks of any size`, () => {
      fc.assert(fc.property(validRequest(signal), fc.option(fc.integer({ min: 1, max: 4096 }), { nil: undefined }), ({ request, items }, maxChunkBytes) => {
        const outcome = same(signal, encodeRequest(signal, request), maxChunkBytes);
        expect(outcome).toMatchObject({ ok: true, accepted: items, rejected: 0 });
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${signal}: corrupted requests (bytes changed, inserted, removed, cut)`, () => {
      fc.assert(fc.property(mutated(validRequest(signal).map(({ request }) => encodeRequest(signal, request))), (body) => {
        same(signal, body);
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${signal}: requests written with damage (padded and over-long varints, wrong wire types, invalid UTF-8, wrong lengths, cut short)`, () => {
      fc.assert(fc.property(damagedRequest(signal), fc.option(fc.integer({ min: 1, max: 2048 }), { nil: undefined }), (body, maxChunkBytes) => {
        same(signal, body, maxChunkBytes);
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${signal}: items refused one by one (ids of the wrong length, histogram buckets that do not fit their bounds)`, () => {
      fc.assert(fc.property(refusedItems(signal), fc.option(fc.integer({ min: 1, max: 2048 }), { nil: undefined }), (body, maxChunkBytes) => {
        same(signal, body, maxChunkBytes);
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${signal}: items over about 100 days: the same rows up to 100, the same refusal past it`, () => {
      fc.assert(fc.property(manyDays(signal), (body) => {
        same(signal, body);
      }), { ...fuzzParameters(), numRuns: Math.min(fuzzParameters().numRuns ?? 50, 50) });
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${signal}: random bytes`, () => {
      fc.assert(fc.property(fc.uint8Array({ maxLength: 512 }), (body) => {
        same(signal, body);
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);
  }

  it('values nested around the depth limit: the same value, or the same refusal past it', () => {
    fc.assert(fc.property(deeplyNested(SIGNALS), ({ signal, body }) => {
      same(signal, body);
    }), fuzzParameters());
  }, FUZZ_TEST_TIMEOUT_MS);

  it('doubles of every bit pattern, alone and inside arrays and kvlists', () => {
    fc.assert(fc.property(doubleValues(SIGNALS), ({ signal, body }) => {
      same(signal, body);
    }), fuzzParameters());
  }, FUZZ_TEST_TIMEOUT_MS);

  it('metric values, sums, bounds and exemplars of any bits', () => {
    fc.assert(fc.property(metricNumbers, (body) => {
      same('metrics', body);
    }), fuzzParameters());
  }, FUZZ_TEST_TIMEOUT_MS);

  it('more than 10,000 attributes, and a kvlist of more than 10,000 entries', () => {
    fc.assert(fc.property(manyAttributes, fc.option(fc.integer({ min: 1, max: 100_000 }), { nil: undefined }), (body, maxChunkBytes) => {
      const outcome = same('traces', body, maxChunkBytes);
      expect(outcome).toMatchObject({ ok: true, accepted: 1 });
    }), { ...fuzzParameters(), numRuns: Math.min(fuzzParameters().numRuns ?? 10, 10) });
  }, FUZZ_TEST_TIMEOUT_MS);

});
