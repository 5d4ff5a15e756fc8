/**
 * Fuzzing the OTLP decoders as a worker runs them (tasks.ts#runTask, in this thread): whatever
 * the bytes, a request gives rows or a 4xx refusal — never an internal error, never a hang.
 * Valid requests of every signal give a row per item, the same rows from protobuf and from
 * OTLP/JSON. Settings and replay: test/fuzz.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeTraces, traceRequest } from '../../test/otlp-fixtures.ts';
import { FUZZ_TEST_TIMEOUT_MS, fuzzParameters, mutated, rowsOrRefusal, runTaskHere } from '../../test/fuzz.ts';
import type { TaskResult } from '../tasks.ts';
import { otlpJson, validRequest } from '../../test/otlp-arbitraries.ts';
import type { Signal } from './index.ts';
import { encodeRequest } from '../../test/otlp-requests.ts';

const SIGNALS: Signal[] = ['traces', 'logs', 'metrics'];

function transcode(signal: Signal, format: 'protobuf' | 'json', body: Uint8Array): Promise<TaskResult> {
  return runTaskHere({ kind: 'otlp', signal, format, encoding: 'identity', body, sourceId: 'src', maxBytes: 16 << 20, maxChunkBytes: Infinity });
}

const rowsOf = (result: TaskResult) => (result.ok ? Buffer.concat(result.tables.map((t) => t.data)) : Buffer.alloc(0));

/** Valid encodings to corrupt: generated requests, and the fixture the HTTP tests send. */
const validProtobuf = (signal: Signal) => fc.oneof(
  validRequest(signal).map(({ request }) => encodeRequest(signal, request)),
  ...(signal === 'traces' ? [fc.nat({ max: 20 }).map((spans) => encodeTraces(traceRequest({ spans })))] : []),
);

/** Valid OTLP/JSON with some values replaced by arbitrary JSON, or by number tokens JSON.stringify cannot write. */
const RAW_NUMBERS = ['1e400', '-1e400', '18446744073709551616', '-9223372036854775809', '1e-400', '-0', '00', '1.0', '9'.repeat(400)];
function looseJson(signal: Signal): fc.Arbitrary<string> {
  const replacement = fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constantFrom(...RAW_NUMBERS).map((raw) => ({ __raw: raw })));
  return fc.tuple(validRequest(signal), fc.array(fc.tuple(fc.nat(), replacement), { minLength: 1, maxLength: 4 })).map(([{ request }, edits]) => {
    const tree = JSON.parse(otlpJson(request));
    const nodes: Array<{ parent: any; key: string | number }> = [];
    const walk = (value: any) => {
      if (!value || typeof value !== 'object') return;
      for (const key of Object.keys(value)) {
        nodes.push({ parent: value, key: Array.isArray(value) ? Number(key) : key });
        walk(value[key]);
      }
    };
    walk(tree);
    for (const [at, value] of edits) {
      if (nodes.length === 0) break;
      const { parent, key } = nodes[at % nodes.length]!;
      parent[key] = value;
    }
    return JSON.stringify(tree).replace(/\{"__raw":"([^"]*)"\}/g, '$1');
  });
}

/** JSON nested `depth` levels: arrays and objects, or attribute values of arrays and kvlists. */
const deepJson = fc.tuple(fc.nat({ max: 700 }), fc.constantFrom('[', '{"a":', '{"arrayValue":{"values":[', '{"kvlistValue":{"values":[{"key":"k","value":')).map(([depth, open]) => {
  const close = open === '[' ? ']' : open === '{"a":' ? '}' : open.startsWith('{"arrayValue"') ? ']}}' : '}]}}';
  const value = `${open.repeat(depth)}{"stringValue":"x"}${close.repeat(depth)}`;
  return `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","attributes":[{"key":"deep","value":${value}}]}]}]}]}`;
});

describe('OTLP decoders under fuzzing', () => {
  for (const signal of SIGNALS) {
    it(`${signal}: a valid request gives one row per item, the same from protobuf and from OTLP/JSON`, async () => {
      await fc.assert(fc.asyncProperty(validRequest(signal), fc.boolean(), async ({ request, items }, snake) => {
        const protobuf = await transcode(signal, 'protobuf', encodeRequest(signal, request));
        const json = await transcode(signal, 'json', Buffer.from(otlpJson(request, snake)));
        expect(protobuf, protobuf.ok ? '' : protobuf.message).toMatchObject({ ok: true, accepted: items, rejected: 0 });
        expect(json, json.ok ? '' : json.message).toMatchObject({ ok: true, accepted: items, rejected: 0 });
        expect(rowsOf(json).equals(rowsOf(protobuf))).toBe(true);
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${signal}: corrupted protobuf (bytes changed, inserted, removed, cut) gives rows or a 4xx`, async () => {
      await fc.assert(fc.asyncProperty(mutated(validProtobuf(signal)), async (body) => {
        rowsOrRefusal(await transcode(signal, 'protobuf', body));
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${signal}: random bytes as protobuf and as JSON give rows or a 4xx`, async () => {
      await fc.assert(fc.asyncProperty(fc.uint8Array({ maxLength: 512 }), async (body) => {
        rowsOrRefusal(await transcode(signal, 'protobuf', body));
        rowsOrRefusal(await transcode(signal, 'json', body));
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${signal}: OTLP/JSON with values of the wrong kind, huge numbers, broken bytes or random JSON gives rows or a 4xx`, async () => {
      const bodies = fc.oneof(
        looseJson(signal).map((text) => Buffer.from(text)),
        mutated(validRequest(signal).map(({ request }) => Buffer.from(otlpJson(request)))),
        fc.jsonValue({ maxDepth: 6 }).map((value) => Buffer.from(JSON.stringify(value) ?? '')),
      );
      await fc.assert(fc.asyncProperty(bodies, async (body) => {
        rowsOrRefusal(await transcode(signal, 'json', body));
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);
  }

  it('deeply nested OTLP/JSON gives rows or a 4xx, never a stack overflow', async () => {
    await fc.assert(fc.asyncProperty(deepJson, async (text) => {
      rowsOrRefusal(await transcode('traces', 'json', Buffer.from(text)));
    }), fuzzParameters());
  }, FUZZ_TEST_TIMEOUT_MS);
});
