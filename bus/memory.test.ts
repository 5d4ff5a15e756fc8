import { describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import type { TableChunk } from './bus.ts';
import { MemoryBus } from './memory.ts';

const chunk = (bytes: number, table = 't'): TableChunk => ({ table, columns: ['a'], rows: 1, data: new Uint8Array(bytes) });
const options = { maxPendingBytes: 1000, maxBatchBytes: 500, timeoutMs: 1000, retryAfterSeconds: 7 };

describe('MemoryBus', () => {
  it('settles a publish only after the sink committed it, batching what queued meanwhile', async () => {
    const bus = new MemoryBus(options);
    const batches: number[] = [];
    let release!: () => void;
    let first = true;
    bus.consume(async (chunks) => {
      batches.push(chunks.length);
      if (first) {
        first = false;
        await new Promise<void>((resolve) => (release = resolve));
      }
    });
    let settled = false;
    const a = bus.publish([chunk(10)]).then(() => (settled = true));
    const b = bus.publish([chunk(10)]);
    const c = bus.publish([chunk(10)]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(settled).toBe(false);
    release();
    await Promise.all([a, b, c]);
    // The first publish went alone; the two that queued behind it shared one insert.
    expect(batches).toEqual([1, 2]);
  });

  it('refuses with 503 when the sink fails, and the next batch is not affected', async () => {
    const bus = new MemoryBus(options);
    let fail = true;
    bus.consume(async () => {
      if (fail) throw new SluiceError('unavailable', 'storage down');
    });
    const error = await bus.publish([chunk(10)]).catch((err) => err);
    expect(error).toBeInstanceOf(SluiceError);
    expect(error.code).toBe('unavailable');
    expect(error.retryAfterSeconds).toBe(7);
    fail = false;
    await expect(bus.publish([chunk(10)])).resolves.toBeUndefined();
    expect(bus.backlogBytes).toBe(0);
  });

  it('bounds memory: refuses publishes past maxPendingBytes', async () => {
    const bus = new MemoryBus(options);
    const held = [bus.publish([chunk(600)]), bus.publish([chunk(300)])];
    const error = await bus.publish([chunk(200)]).catch((err) => err);
    expect(error.code).toBe('unavailable');
    expect(bus.backlogBytes).toBe(900);
    bus.consume(async () => {});
    await Promise.all(held);
  });

  it('withdraws a publish still queued after the timeout: it is never stored', async () => {
    const bus = new MemoryBus({ ...options, timeoutMs: 50 });
    const stored: TableChunk[] = [];
    const error = await bus.publish([chunk(10)]).catch((err) => err);
    expect(error.code).toBe('unavailable');
    bus.consume(async (chunks) => {
      stored.push(...chunks);
    });
    await bus.publish([chunk(20)]);
    expect(stored.map((c) => c.data.byteLength)).toEqual([20]);
  });

  it('isolates a request whose rows storage refuses: it gets the error, the rest of the group commit is stored', async () => {
    const bus = new MemoryBus(options);
    const stored: number[] = [];
    const inserts: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    bus.consume(async (chunks) => {
      inserts.push(chunks.length);
      if (chunks.some((c) => c.data.byteLength === 13)) throw new SluiceError('bad_request', 'storage refused the rows for t: code 252');
      if (chunks.some((c) => c.data.byteLength === 1)) await gate; // holds the first insert so the rest queue up
      stored.push(...chunks.map((c) => c.data.byteLength));
    });
    const first = bus.publish([chunk(1)]);
    const sizes = [10, 11, 12, 13, 14, 15, 16];
    const results = sizes.map((size) => bus.publish([chunk(size)]).then(() => 'ok', (err) => err.code));
    release();
    await first;
    expect(await Promise.all(results)).toEqual(['ok', 'ok', 'ok', 'bad_request', 'ok', 'ok', 'ok']);
    expect(stored.sort((a, b) => a - b)).toEqual([1, 10, 11, 12, 14, 15, 16]);
    // One group commit of 7, then halves down to the offender (7 → 3 + 4 → 2 + 2 → 1 + 1).
    expect(inserts.slice(1)).toEqual([7, 3, 4, 2, 1, 1, 2]);
    expect(bus.backlogBytes).toBe(0);
  });

  it('refuses every request of a group with 503 when storage is down while splitting', async () => {
    const bus = new MemoryBus(options);
    // Both queue before the consumer is attached: one group commit.
    const results = [bus.publish([chunk(10)]), bus.publish([chunk(11)])].map((p) => p.catch((err) => err));
    let calls = 0;
    bus.consume(async () => {
      calls++;
      if (calls === 1) throw new SluiceError('bad_request', 'storage refused the rows');
      throw new SluiceError('unavailable', 'storage went away');
    });
    const errors = await Promise.all(results);
    expect(calls).toBe(2); // the split stopped at the outage instead of trying every half
    for (const err of errors) expect([err.code, err.retryAfterSeconds]).toEqual(['unavailable', 7]);
  });
});

