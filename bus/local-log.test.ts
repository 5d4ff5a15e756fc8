/**
 * The embedded bus on its write-ahead log, with a sink in the test's hands: group commit, replay
 * after a crash (the batch in flight again under the same tokens), torn records cut at open,
 * outages retried while the log takes rows, refused rows dead-lettered, the log full → 503,
 * reads waiting for acknowledged rows, segments deleted once applied.
 */
import { appendFile, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { createLogger } from '../core/log.ts';
import { eventually } from '../test/harness.ts';
import type { ChunkSink, TableChunk } from './bus.ts';
import { LocalLogBus, type LocalLogBusOptions } from './local-log.ts';
import { RecordLog } from './record-log.ts';
import { ROW_CODEC } from './row-codec.ts';

const dirs: string[] = [];
const buses: LocalLogBus[] = [];
afterEach(async () => {
  for (const bus of buses.splice(0)) await bus.shutdown().catch(() => {});
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function logDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-log-'));
  dirs.push(dir);
  return join(dir, 'log');
}

async function openBus(dir: string, options: Partial<LocalLogBusOptions> = {}): Promise<LocalLogBus> {
  const bus = new LocalLogBus({ dir, maxPendingBytes: 64 * 1024 * 1024, maxBatchBytes: 1024 * 1024, flushIntervalMs: 20, flushBytes: 1024 * 1024, timeoutMs: 5_000, retryAfterSeconds: 7, ...options });
  await bus.start();
  buses.push(bus);
  return bus;
}

/** A chunk whose rows are `rows` copies of `label` (one byte of length, then the text: RowBinary of a String column). */
function chunk(label: string, table = 'otel_traces', rows = 1): TableChunk {
  const one = Buffer.concat([Buffer.from([label.length]), Buffer.from(label)]);
  return { table, columns: ['Name'], rows, data: Buffer.concat(Array.from({ length: rows }, () => one)) };
}

function labels(chunks: readonly TableChunk[]): string[] {
  const out: string[] = [];
  for (const { data } of chunks) {
    for (let at = 0; at < data.length; at += 1 + data[at]!) out.push(Buffer.from(data.subarray(at + 1, at + 1 + data[at]!)).toString());
  }
  return out;
}

/** A storage that keeps labels per table and drops an insert whose token it has seen (as ClickHouse's dedup window does). */
function recordingSink() {
  const stored: Record<string, string[]> = {};
  const tokens: string[] = [];
  const inserts: number[] = [];
  const sink: ChunkSink = async (chunks, token) => {
    if (token && tokens.includes(token)) return;
    if (token) tokens.push(token);
    inserts.push(chunks.length);
    for (const c of chunks) (stored[c.table] ??= []).push(...labels([c]));
  };
  return { sink, stored, tokens, inserts };
}

describe('LocalLogBus', () => {
  it('acknowledges once the rows are written, then inserts them in batches in order', async () => {
    const bus = await openBus(await logDir(), { flushIntervalMs: 200 });
    const storage = recordingSink();
    bus.consume(storage.sink);
    await Promise.all(Array.from({ length: 50 }, (_, i) => bus.publish([chunk(`r${i}`), chunk(`m${i}`, 'otel_metrics_sum')])));
    // Acknowledged before storage has them: the flush interval has not passed.
    expect(storage.stored).toEqual({});
    await bus.settled();
    expect(storage.stored.otel_traces).toEqual(Array.from({ length: 50 }, (_, i) => `r${i}`));
    expect(storage.stored.otel_metrics_sum).toEqual(Array.from({ length: 50 }, (_, i) => `m${i}`));
    // One insert per table for the 50 requests.
    expect(storage.inserts.length).toBe(2);
    expect(bus.pendingBytes).toBe(0);
  });

  it('replays after a crash what was acknowledged and not applied, and the batch in flight under the same tokens', async () => {
    const dir = await logDir();
    const first = await openBus(dir, { flushIntervalMs: 10 });
    const storage = recordingSink();
    // Storage commits the batch but the process dies before it hears back: the sink never returns.
    let committed = 0;
    first.consume(async (chunks, token) => {
      await storage.sink(chunks, token);
      committed++;
      await new Promise(() => {});
    });
    await Promise.all(['a', 'b', 'c'].map((label) => first.publish([chunk(label)])));
    await eventually(() => committed === 1);
    const tokensBefore = [...storage.tokens];
    await first.publish([chunk('d')]); // acknowledged while the insert hangs

    // A new process on the same directory (the first is gone without a shutdown).
    buses.splice(buses.indexOf(first), 1);
    const second = await openBus(dir, { flushIntervalMs: 10 });
    const seen: string[] = [];
    second.consume(async (chunks, token) => {
      seen.push(token!);
      await storage.sink(chunks, token);
    });
    await eventually(() => storage.stored.otel_traces?.includes('d'));
    expect(seen[0]).toBe(tokensBefore[0]); // the batch in flight again, exactly
    expect(storage.stored.otel_traces).toEqual(['a', 'b', 'c', 'd']);
  });

  it('cuts a record left unfinished by a crash and keeps every whole one', async () => {
    const dir = await logDir();
    const bus = await openBus(dir, { flushIntervalMs: 60_000 });
    await bus.publish([chunk('kept-1')]);
    await bus.publish([chunk('kept-2', 'otel_logs', 3)]);
    const [segment] = (await readdir(dir)).filter((name) => name.endsWith('.seg'));
    const whole = (await stat(join(dir, segment!))).size;
    // Half a record: a length that promises more than follows.
    await appendFile(join(dir, segment!), Buffer.from([200, 0, 0, 0, 1, 2, 3, 4, 5]));

    const repairs: unknown[] = [];
    const log = new RecordLog(dir, ROW_CODEC, { segmentBytes: 1 << 20, onRepair: (detail) => repairs.push(detail) });
    await log.open();
    expect(repairs).toEqual([{ segment, keptBytes: whole, cutBytes: 9, reason: 'a record cut short' }]);
    const { records } = await log.read(0, Infinity);
    expect(records.map((r) => labels(r.value))).toEqual([['kept-1'], ['kept-2', 'kept-2', 'kept-2']]);
    expect(records[1]!.value[0]).toMatchObject({ table: 'otel_logs', columns: ['Name'], rows: 3 });
    await log.close();
  });

  it('cuts at a record whose checksum does not match', async () => {
    const dir = await logDir();
    const bus = await openBus(dir, { flushIntervalMs: 60_000 });
    await bus.publish([chunk('good')]);
    await bus.publish([chunk('flipped')]);
    await bus.shutdown();
    const [segment] = (await readdir(dir)).filter((name) => name.endsWith('.seg'));
    const bytes = await readFile(join(dir, segment!));
    const at = bytes.lastIndexOf(Buffer.from('flipped'));
    bytes[at] = 'F'.charCodeAt(0);
    await rm(join(dir, segment!));
    await appendFile(join(dir, segment!), bytes);

    const again = await openBus(dir, { flushIntervalMs: 10 });
    const storage = recordingSink();
    again.consume(storage.sink);
    await again.settled();
    expect(storage.stored.otel_traces).toEqual(['good']);
  });

  it('keeps acknowledging while storage is down, retries, and stores everything once when it is back', async () => {
    const bus = await openBus(await logDir(), { flushIntervalMs: 10 });
    const storage = recordingSink();
    let down = true;
    let failures = 0;
    bus.consume(async (chunks, token) => {
      if (down) {
        failures++;
        throw new SluiceError('unavailable', 'storage is down');
      }
      await storage.sink(chunks, token);
    });
    for (let i = 0; i < 5; i++) await bus.publish([chunk(`x${i}`)]);
    // The status is set once the failed insert's error came back to the bus, a moment after the throw.
    await eventually(() => failures >= 2 && bus.statuses().bus?.ok === false);
    expect(bus.statuses().bus).toMatchObject({ ok: false, detail: expect.stringContaining('storage inserts are failing') });
    down = false;
    await eventually(() => storage.stored.otel_traces?.length === 5, 20_000);
    expect(storage.stored.otel_traces).toEqual(['x0', 'x1', 'x2', 'x3', 'x4']);
    // Healthy again once the bus has heard the insert succeed (pending bytes 0), a moment after
    // the sink stored the rows.
    await eventually(() => bus.statuses().bus?.ok === true);
  });

  it('stops inserting at the shutdown deadline and leaves the rest in the log for the next start', async () => {
    const dir = await logDir();
    const bus = await openBus(dir, { flushIntervalMs: 10, maxBatchBytes: 16 });
    let release: () => void = () => {};
    const slow = recordingSink();
    // Each insert waits to be let go: a slow storage behind a long backlog.
    bus.consume(async (chunks, token) => {
      await new Promise<void>((resolve) => (release = resolve));
      await slow.sink(chunks, token);
    });
    for (let i = 0; i < 20; i++) await bus.publish([chunk(`s${i}`)]);
    const stopped = bus.shutdown(Date.now() + 200);
    const releaser = setInterval(() => release(), 50);
    await stopped;
    clearInterval(releaser);
    const inserted = slow.stored.otel_traces ?? [];
    expect(inserted.length).toBeLessThan(20);

    const storage = recordingSink();
    const reopened = await openBus(dir, { flushIntervalMs: 10 });
    reopened.consume(storage.sink);
    await eventually(() => inserted.length + (storage.stored.otel_traces?.length ?? 0) === 20);
    expect([...inserted, ...storage.stored.otel_traces!]).toEqual(Array.from({ length: 20 }, (_, i) => `s${i}`));
  });

  it('dead-letters the rows storage refuses, with the reason, and stores the rest of the batch', async () => {
    const dir = await logDir();
    const bus = await openBus(dir, { flushIntervalMs: 50 });
    const storage = recordingSink();
    bus.consume(async (chunks, token) => {
      if (labels(chunks).includes('poison')) throw new SluiceError('bad_request', 'storage refused the rows for otel_traces: not these');
      await storage.sink(chunks, token);
    });
    await Promise.all(['a', 'b', 'poison', 'c'].map((label) => bus.publish([chunk(label)])));
    await bus.settled();
    expect(storage.stored.otel_traces).toEqual(['a', 'b', 'c']);
    const [file] = await readdir(join(dir, 'dead-letters'));
    const letter = JSON.parse(await readFile(join(dir, 'dead-letters', file!), 'utf8'));
    expect(letter.reason).toBe('storage refused the rows for otel_traces: not these');
    expect(letter.chunks).toEqual([{ table: 'otel_traces', columns: ['Name'], rows: 1, format: 'RowBinary', data: Buffer.from('\x06poison').toString('base64') }]);
    expect(bus.totals.deadLettered).toBe(1);
  });

  it('logs a refused batch with the reason even when each of its requests is stored on its own', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
    const bus = await openBus(await logDir(), { flushIntervalMs: 300, log });
    const storage = recordingSink();
    // Storage takes each request alone but not two together (as ClickHouse took 60 days twice, not 120 days at once).
    bus.consume(async (chunks, token) => {
      if (chunks.length > 1) throw new SluiceError('bad_request', 'storage refused the rows for otel_traces: together they are too many');
      await storage.sink(chunks, token);
    });
    await Promise.all(['a', 'b', 'c'].map((label) => bus.publish([chunk(label)])));
    await bus.settled();
    expect(storage.stored.otel_traces!.sort()).toEqual(['a', 'b', 'c']);
    expect(bus.totals.deadLettered).toBe(0);
    expect(lines.find((line) => line.level === 40)).toMatchObject({
      msg: 'storage refused the rows of a batch: splitting it to find the requests it refuses',
      table: 'otel_traces', reason: 'storage refused the rows for otel_traces: together they are too many',
    });
  });

  it('refuses with 503 + Retry-After once the rows not yet in storage reach the limit', async () => {
    const bus = await openBus(await logDir(), { maxPendingBytes: 1024 * 1024, flushIntervalMs: 10 });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const storage = recordingSink();
    bus.consume(async (chunks, token) => {
      await held;
      await storage.sink(chunks, token);
    });
    const big = (label: string) => chunk(label.padEnd(100, '.'), 'otel_traces', 2000); // ~200 KB
    const outcomes = await Promise.all(Array.from({ length: 8 }, (_, i) => bus.publish([big(`b${i}`)]).then(() => 'ok', (err: SluiceError) => err)));
    const refused = outcomes.filter((o): o is SluiceError => o !== 'ok');
    expect(refused.length).toBeGreaterThan(0);
    for (const err of refused) expect(err).toMatchObject({ code: 'unavailable', retryAfterSeconds: 7, message: 'storage is behind: the local log is full' });
    // Full: the next requests are refused before they are decoded, even one whose rows would fit...
    expect(bus.refusal()).toMatchObject({ code: 'unavailable', retryAfterSeconds: 7, message: 'storage is behind: the local log is full' });
    await expect(bus.publish([chunk('small')])).resolves.toBeUndefined();
    expect(bus.refusal()).toBeDefined();
    release();
    await bus.settled();
    // ...until storage frees room.
    expect(bus.refusal()).toBeUndefined();
    expect(storage.stored.otel_traces!.length).toBe((8 - refused.length) * 2000 + 1);
    await bus.shutdown();
    expect(bus.refusal()).toMatchObject({ code: 'unavailable', message: 'shutting down' });
  });

  it('lets a reader wait for rows acknowledged before it, sooner than the flush interval', async () => {
    const bus = await openBus(await logDir(), { flushIntervalMs: 30_000 });
    const storage = recordingSink();
    bus.consume(storage.sink);
    await bus.publish([chunk('now')]);
    const started = Date.now();
    await bus.settled();
    expect(storage.stored.otel_traces).toEqual(['now']);
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it('holds inserts while the memory budget has no room, and inserts once it has', async () => {
    const memory = { room: false, asked: 0, hasRoom() { this.asked++; return this.room; } };
    const bus = await openBus(await logDir(), { memory });
    const storage = recordingSink();
    bus.consume(storage.sink);
    await bus.publish([chunk('held')]); // acknowledged: the log has it
    // Asked again and again (every 50 ms) without inserting.
    await eventually(() => memory.asked >= 5);
    expect(storage.stored).toEqual({});
    memory.room = true;
    await eventually(() => storage.stored.otel_traces?.length === 1);
    expect(storage.stored.otel_traces).toEqual(['held']);
  });

  it('inserts anyway after two seconds without room: memory that does not come back must not keep acknowledged rows from storage', async () => {
    const memory = { asked: 0, hasRoom() { this.asked++; return false; } };
    const bus = await openBus(await logDir(), { memory });
    const storage = recordingSink();
    bus.consume(storage.sink);
    await bus.publish([chunk('late')]);
    await eventually(() => storage.stored.otel_traces?.length === 1, 10_000);
    // It waited first (50 ms apart, about 40 times in two seconds).
    expect(memory.asked).toBeGreaterThan(10);
  });

  it('takes back an append the writer has not taken yet: it is never written', async () => {
    const log = new RecordLog(await logDir(), ROW_CODEC, { segmentBytes: 1 << 20 });
    await log.open();
    const first = log.append([chunk('written')]); // the writer takes it at once
    const second = log.append([chunk('withdrawn')]); // queued behind that write
    expect(second.withdraw()).toBe(true);
    expect(first.withdraw()).toBe(false);
    await first.done;
    const { records } = await log.read(0, Infinity);
    expect(records.map((r) => labels(r.value))).toEqual([['written']]);
    await log.close();
  });

  it('rolls segments and deletes the ones wholly applied', async () => {
    const dir = await logDir();
    const bus = await openBus(dir, { segmentBytes: 4096, flushIntervalMs: 10 });
    const storage = recordingSink();
    bus.consume(storage.sink);
    for (let i = 0; i < 40; i++) await bus.publish([chunk(`s${i}`.padEnd(200, '.'))]);
    await bus.settled();
    expect(storage.stored.otel_traces!.length).toBe(40);
    await eventually(async () => (await readdir(dir)).filter((name) => name.endsWith('.seg')).length === 1);
    // After a restart nothing is inserted again.
    await bus.shutdown();
    const again = await openBus(dir, { flushIntervalMs: 10 });
    const second = recordingSink();
    again.consume(second.sink);
    await again.publish([chunk('next')]);
    await again.settled();
    expect(second.stored.otel_traces).toEqual(['next']);
  });
});
