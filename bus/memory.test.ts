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
      if (fail) throw new Error('storage down');
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
});
