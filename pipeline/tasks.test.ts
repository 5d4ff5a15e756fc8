/**
 * A worker thread reuses its buffers from task to task (the inflated body, the row writers):
 * these tests fail if a result still pointed into one of them when the next task ran, and
 * check that rows cross the thread boundary whole and without a copy.
 */
import { gzipSync } from 'node:zlib';
import { compress as zstdCompress } from '@mongodb-js/zstd';
import { valueSymbol } from 'piscina';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transcodeAgent } from './agent/rows.ts';
import { transcodeOtlp } from './otlp/index.ts';
import { attrs, encodeRequest } from '../test/otlp-requests.ts';
import { PipelinePool } from './pool.ts';
import { runTask, type PipelineTask, type TaskResult, type TaskSuccess } from './tasks.ts';

const RECEIVED = 1_795_000_000_000_000_000n;

/** A trace export request of `spans` spans whose every string depends on `seed`. */
function traces(seed: number, spans: number): Uint8Array {
  const id = (bytes: number, n: number) => Buffer.from(Array.from({ length: bytes }, (_, i) => (seed * 31 + n * 7 + i) % 255 + 1));
  return encodeRequest('traces', {
    resourceSpans: [{
      resource: { attributes: attrs({ 'service.name': `service-${seed}` }) },
      scopeSpans: [{
        scope: { name: `scope-${seed}` },
        spans: Array.from({ length: spans }, (_, n) => ({
          traceId: id(16, n),
          spanId: id(8, n),
          name: `span ${seed}/${n} ${'x'.repeat(seed % 50)}`,
          startTimeUnixNano: String(1_700_000_000_000_000_000n + BigInt(n)),
          endTimeUnixNano: String(1_700_000_000_000_500_000n + BigInt(n)),
          attributes: attrs({ seed: `value-${seed}-${n}`, n, ratio: seed / 7 }),
        })),
      }],
    }],
  });
}

function agentLogs(seed: number, entries: number): Uint8Array {
  const batch = { host: `host-${seed}`, entries: Array.from({ length: entries }, (_, n) => ({ message: `line ${seed}/${n}`, level: 'info', attributes: { n } })) };
  return Buffer.from(JSON.stringify(batch));
}

/** `bytes` in a buffer of its own, as the HTTP front end hands bodies over (transferable, unlike a native addon's). */
function owned(bytes: Uint8Array): Uint8Array {
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return copy;
}

const gzipOwned = (body: Uint8Array) => owned(gzipSync(body));

const otlpTask = (body: Uint8Array): PipelineTask => ({
  kind: 'otlp', signal: 'traces', format: 'protobuf', encoding: 'gzip', body: gzipOwned(body), sourceId: 'src', maxBytes: 1 << 24, maxChunkBytes: Infinity,
});
const agentTask = (body: Uint8Array): PipelineTask => ({
  kind: 'agent', payload: 'logs', encoding: 'gzip', body: gzipOwned(body), sourceId: 'src', maxBytes: 1 << 24, maxChunkBytes: Infinity, receivedAt: String(RECEIVED),
});

/** runTask's answer as piscina hands it over: the value inside move()'s wrapper. */
async function run(task: PipelineTask): Promise<TaskSuccess> {
  const answer = (await runTask(task)) as { [valueSymbol]?: TaskResult } & TaskResult;
  const result = answer[valueSymbol] ?? answer;
  if (!result.ok) throw new Error(`task failed: ${result.message}`);
  return result;
}

const rowsOf = (result: { tables: Array<{ data: Uint8Array }> }) => Buffer.concat(result.tables.map((t) => t.data));

describe('runTask in one thread, task after task', () => {
  it("leaves the first request's rows intact after later requests reused the thread's buffers", async () => {
    // Large, then small, then large again: the inflate buffer and the writers grow, then are reused.
    const bodies = [traces(1, 400), traces(2, 3), traces(3, 250), traces(4, 400)];
    const expected = bodies.map((body) => rowsOf(transcodeOtlp('traces', 'protobuf', body, 'src')));
    const results = [];
    for (const body of bodies) results.push(await run(otlpTask(body)));
    const logs = agentLogs(5, 300);
    const logResult = await run(agentTask(logs));
    results.forEach((result, i) => expect(rowsOf(result).equals(expected[i]!), `request ${i}`).toBe(true));
    expect(rowsOf(logResult).equals(rowsOf(transcodeAgent('logs', logs, 'src', Infinity, RECEIVED)))).toBe(true);
  });

  it('gives every chunk a buffer of its own, so it can be transferred', async () => {
    const result = await run({ ...otlpTask(traces(6, 300)), maxChunkBytes: 8 * 1024 } as PipelineTask);
    expect(result.tables.length).toBeGreaterThan(3);
    const buffers = new Set(result.tables.map((t) => t.data.buffer));
    expect(buffers.size).toBe(result.tables.length);
    for (const { data } of result.tables) expect([data.byteOffset, data.byteLength]).toEqual([0, data.buffer.byteLength]);
  });
});

describe('spare buffers in a worker thread', () => {
  it('writes rows into a spare that fits, and leaves alone one too small or too large', async () => {
    const body = traces(12, 200);
    const expected = rowsOf(transcodeOtlp('traces', 'protobuf', body, 'src'));
    const tooSmall = new ArrayBuffer(expected.length - 1);
    const tooLarge = new ArrayBuffer(expected.length * 2);
    const fits = new ArrayBuffer(expected.length + 100);
    const result = await run({ ...otlpTask(body), spares: [tooSmall, tooLarge, fits] } as PipelineTask);
    expect(result.tables).toHaveLength(1);
    const { data } = result.tables[0]!;
    expect(data.buffer).toBe(fits);
    expect([data.byteOffset, data.byteLength]).toEqual([0, expected.length]);
    expect(Buffer.from(data).equals(expected)).toBe(true);
    // The others wait for later rows; a fresh right-sized buffer when none fits.
    const next = await run(otlpTask(traces(13, 1)));
    expect([tooSmall, tooLarge]).not.toContain(next.tables[0]!.data.buffer);
  });
});

describe('PipelinePool', () => {
  // One thread: every task goes through the same reused buffers.
  const pool = new PipelinePool({ workers: 1, retryAfterSeconds: 1 });
  beforeAll(() => pool.start());
  afterAll(() => pool.shutdown());

  it('moves the body in and the rows out without copies, and the rows arrive whole', async () => {
    const bodies = [traces(7, 500), traces(8, 20), traces(9, 500)];
    const results = [];
    for (const body of bodies) {
      const task = otlpTask(body);
      const sent = task.body;
      const result = await pool.run(task);
      // Transferred: the main thread's copy of the body is detached, not cloned.
      expect(sent.byteLength).toBe(0);
      if (!result.ok) throw new Error(result.message);
      results.push(result);
    }
    results.forEach((result, i) => {
      expect(rowsOf(result).equals(rowsOf(transcodeOtlp('traces', 'protobuf', bodies[i]!, 'src'))), `request ${i}`).toBe(true);
      for (const { data } of result.tables) expect([data.byteOffset, data.byteLength]).toEqual([0, data.buffer.byteLength]);
    });
  });

  it('sends recycled row buffers back to the worker: the old views go empty, the new rows are whole', async () => {
    // Shrinking requests (same name lengths: seeds 50 apart), so a previous buffer fits the next rows.
    const bodies = Array.from({ length: 12 }, (_, i) => traces(20 + 50 * i, i % 4 === 0 ? 400 : 200 - i));
    let previous: TaskSuccess | undefined;
    let written = 0; // rows that went into a recycled buffer (a little longer than they are)
    for (const [i, body] of bodies.entries()) {
      const result = await pool.run(otlpTask(body));
      if (!result.ok) throw new Error(result.message);
      expect(rowsOf(result).equals(rowsOf(transcodeOtlp('traces', 'protobuf', body, 'src'))), `request ${i}`).toBe(true);
      written += result.tables.filter(({ data }) => data.buffer.byteLength > data.byteLength).length;
      // The previous rows' buffers went to the worker with this task: nothing here can read them.
      if (previous) for (const { data } of previous.tables) expect(data.byteLength).toBe(0);
      pool.recycle(result.tables);
      previous = result;
    }
    expect(written).toBeGreaterThan(0);
    // A refused request in between (the spares stay with the worker) changes nothing.
    expect(await pool.run({ ...otlpTask(Buffer.from('not protobuf')), encoding: 'identity', body: Buffer.from([0xff, 0xff]) } as PipelineTask)).toMatchObject({ ok: false });
    const last = await pool.run(otlpTask(bodies[0]!));
    expect(last.ok && rowsOf(last).equals(rowsOf(transcodeOtlp('traces', 'protobuf', bodies[0]!, 'src')))).toBe(true);
  });

  it('keeps every result whole when the thread holds tasks of every encoding at once', async () => {
    // A thread holds a second task while it runs one (pool.ts): zstd awaits its inflate, and
    // gzip and identity bodies go through the thread's one inflater and writers meanwhile.
    const bodies = Array.from({ length: 24 }, (_, i) => traces(100 + i, 50 + 37 * (i % 5)));
    const zstdBodies = await Promise.all(bodies.map(async (body) => owned(await zstdCompress(Buffer.from(body)))));
    const logs = agentLogs(30, 200);
    const tasks = bodies.map((body, i): PipelineTask => {
      if (i % 3 === 0) return { ...otlpTask(body), encoding: 'zstd', body: zstdBodies[i]! } as PipelineTask;
      if (i % 3 === 1) return { ...otlpTask(body), encoding: 'identity', body: owned(body) } as PipelineTask;
      return otlpTask(body);
    });
    const [logResult, ...results] = await Promise.all([pool.run(agentTask(logs)), ...tasks.map((task) => pool.run(task))]);
    results.forEach((result, i) => {
      expect(result.ok && rowsOf(result).equals(rowsOf(transcodeOtlp('traces', 'protobuf', bodies[i]!, 'src'))), `request ${i}`).toBe(true);
    });
    expect(logResult!.ok && rowsOf(logResult!).equals(rowsOf(transcodeAgent('logs', logs, 'src', Infinity, RECEIVED)))).toBe(true);
  });

  it('sends the requests of one turn to the thread as one message, each request answered with its own rows or refusal', async () => {
    const before = pool.status().figures!;
    const bodies = Array.from({ length: 9 }, (_, i) => traces(300 + i, 20 + i));
    const tasks = bodies.map((body, i) => (i === 4 ? { ...otlpTask(body), body: owned(Buffer.from('not gzip')) } : otlpTask(body)));
    // The same body twice: its buffer is transferred once.
    tasks.push({ ...tasks[0]! });
    bodies.push(bodies[0]!);
    const results = await Promise.all(tasks.map((task) => pool.run(task)));
    results.forEach((result, i) => {
      if (i === 4) expect(result).toMatchObject({ ok: false, code: 'bad_request' });
      else expect(result.ok && rowsOf(result).equals(rowsOf(transcodeOtlp('traces', 'protobuf', bodies[i]!, 'src'))), `request ${i}`).toBe(true);
    });
    const after = pool.status().figures!;
    expect([Number(after.requests) - Number(before.requests), Number(after.messages) - Number(before.messages)]).toEqual([10, 1]);
  });

  it('refuses a gzip bomb after a large request grew the thread\'s buffer, and serves the next request', async () => {
    const large = await pool.run({ ...otlpTask(traces(10, 3000)), maxBytes: 2 << 20 } as PipelineTask);
    expect(large.ok).toBe(true);
    const bomb = await pool.run({ ...otlpTask(Buffer.alloc(64 << 20)), maxBytes: 2 << 20 } as PipelineTask);
    expect(bomb).toMatchObject({ ok: false, code: 'payload_too_large' });
    const next = await pool.run(otlpTask(traces(11, 10)));
    expect(next.ok && rowsOf(next).equals(rowsOf(transcodeOtlp('traces', 'protobuf', traces(11, 10), 'src')))).toBe(true);
  });
});
