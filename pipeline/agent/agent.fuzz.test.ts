/**
 * Fuzzing the agent API decoder as a worker runs it (tasks.ts#runTask, in this thread): valid
 * payloads of every kind give a row per entry; anything else gives rows or a 4xx refusal, never
 * an internal error. Settings and replay: test/fuzz.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FUZZ_TEST_TIMEOUT_MS, fuzzParameters, mutated, rowsOrRefusal, runTaskHere } from '../../test/fuzz.ts';
import type { TaskResult } from '../tasks.ts';
import type { AgentKind } from './schemas.ts';

const RECEIVED = 1_795_000_000_000_000_000n;
const KINDS: AgentKind[] = ['logs', 'metrics', 'heartbeat', 'deploy'];

function transcode(payload: AgentKind, body: Uint8Array): Promise<TaskResult> {
  return runTaskHere({ kind: 'agent', payload, encoding: 'identity', body, sourceId: 'src', maxBytes: 16 << 20, maxChunkBytes: Infinity, receivedAt: String(RECEIVED) });
}

// ---- valid payloads --------------------------------------------------------------------------

const text = (maxLength: number) => fc.string({ unit: 'binary', maxLength });
/** Epoch nanoseconds Sluice takes: 1e17 (1973) to 2^63 - 1 (2262). */
const nanos = fc.bigInt({ min: 100_000_000_000_000_000n, max: 2n ** 63n - 1n });
const pad = (n: number, width = 2) => String(n).padStart(width, '0');
/** The same instant as RFC 3339 (to the nanosecond, in a random offset), or epoch nanoseconds as a string or a safe number. */
const timestamp = fc.tuple(nanos, fc.integer({ min: -(23 * 60 + 59), max: 23 * 60 + 59 }), fc.nat({ max: 3 })).map(([ns, offsetMinutes, form]) => {
  if (form === 0) return String(ns);
  if (form === 1 && ns <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(ns);
  const local = new Date(Number(ns / 1_000_000n) + offsetMinutes * 60_000);
  if (local.getUTCFullYear() > 9999 || local.getUTCFullYear() < 1000) return String(ns);
  const fraction = String(ns % 1_000_000_000n).padStart(9, '0').replace(/0+$/, '');
  const offset = offsetMinutes === 0 ? 'Z' : `${offsetMinutes < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(offsetMinutes) / 60))}:${pad(Math.abs(offsetMinutes) % 60)}`;
  const date = `${local.getUTCFullYear()}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}T${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}`;
  return `${date}${fraction ? `.${fraction}` : ''}${offset}`;
});
const attributes = fc.dictionary(text(40).filter((key) => key.length > 0 && [...key].length <= 256), fc.oneof(text(40), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean()), { maxKeys: 6 });
const level = fc.oneof(fc.constantFrom('info', 'WARN', 'Error', 'critical', 'constructor', '__proto__', 'toString'), text(32));

const logBatch = fc.record({
  host: text(255), service: text(255), attributes,
  entries: fc.array(fc.record({ message: text(100), timestamp, level, service: text(255), host: text(255), attributes }, { requiredKeys: ['message'] }), { maxLength: 40 }),
}, { requiredKeys: ['entries'] });
const metricBatch = fc.record({
  host: text(255), service: text(255), attributes,
  metrics: fc.array(fc.record({
    name: fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_.:/-]{0,40}$/), value: fc.double({ noNaN: true, noDefaultInfinity: true }), type: fc.constantFrom('gauge', 'counter'),
    unit: text(64), timestamp, service: text(255), host: text(255), attributes,
  }, { requiredKeys: ['name', 'value'] }), { maxLength: 40 }),
}, { requiredKeys: ['metrics'] });
const heartbeat = fc.record({
  agentId: text(128).filter((s) => s.length > 0), version: text(64).filter((s) => s.length > 0), host: text(255), os: text(64), arch: text(32), status: text(32), startedAt: timestamp, attributes,
}, { requiredKeys: ['agentId', 'version'] });
const deploy = fc.record({
  service: text(255).filter((s) => s.length > 0), version: text(128).filter((s) => s.length > 0), environment: text(64), commit: text(64), deployedBy: text(255),
  description: text(300), url: text(100).map((path) => `https://ci.example/${encodeURIComponent(path)}`), timestamp, attributes,
}, { requiredKeys: ['service', 'version'] });

/** Valid payloads and the rows each gives (text lengths are in code points, as the schemas count them). */
const VALID: Record<AgentKind, fc.Arbitrary<{ body: object; rows: number }>> = {
  logs: logBatch.map((body) => ({ body, rows: body.entries.length })),
  metrics: metricBatch.map((body) => ({ body, rows: body.metrics.length })),
  heartbeat: heartbeat.map((body) => ({ body, rows: 1 })),
  deploy: deploy.map((body) => ({ body, rows: 1 })),
};

/** A valid payload with some values replaced by arbitrary JSON. */
function loose(kind: AgentKind): fc.Arbitrary<string> {
  return fc.tuple(VALID[kind], fc.array(fc.tuple(fc.nat(), fc.jsonValue({ maxDepth: 3 })), { minLength: 1, maxLength: 3 })).map(([{ body }, edits]) => {
    const tree = JSON.parse(JSON.stringify(body));
    const nodes: Array<{ parent: any; key: string }> = [];
    const walk = (value: any) => {
      if (!value || typeof value !== 'object') return;
      for (const key of Object.keys(value)) {
        nodes.push({ parent: value, key });
        walk(value[key]);
      }
    };
    walk(tree);
    for (const [at, value] of edits) if (nodes.length > 0) nodes[at % nodes.length]!.parent[nodes[at % nodes.length]!.key] = value;
    return JSON.stringify(tree);
  });
}

describe('the agent API decoder under fuzzing', () => {
  for (const kind of KINDS) {
    it(`${kind}: a valid payload gives one row per entry`, async () => {
      await fc.assert(fc.asyncProperty(VALID[kind], async ({ body, rows }) => {
        const result = await transcode(kind, Buffer.from(JSON.stringify(body)));
        expect(result, result.ok ? '' : result.message).toMatchObject({ ok: true, accepted: rows });
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${kind}: values of the wrong kind, broken bytes, random JSON or bytes give rows or a 4xx`, async () => {
      const bodies = fc.oneof(
        loose(kind).map((text) => Buffer.from(text)),
        mutated(VALID[kind].map(({ body }) => Buffer.from(JSON.stringify(body)))),
        fc.jsonValue({ maxDepth: 40 }).map((value) => Buffer.from(JSON.stringify(value) ?? '')),
        fc.uint8Array({ maxLength: 256 }),
      );
      await fc.assert(fc.asyncProperty(bodies, async (body) => rowsOrRefusal(await transcode(kind, body))), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);
  }
});
