import { describe, expect, it, vi } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import { BodyCollector, READ_AHEAD_BYTES } from './body.ts';

const bytes = (n: number, fill = 1) => new Uint8Array(n).fill(fill);

/** An allowance that records what it was asked for and refuses past `limit`. */
function allowance(limit = Infinity) {
  const asked: number[] = [];
  return {
    asked,
    resize(n: number) {
      if (n > limit) throw new SluiceError('unavailable', 'budget used up', { retryAfterSeconds: 3 });
      asked.push(n);
    },
  };
}

/** Flow control that records pauses and resumes. */
function flow() {
  const calls: string[] = [];
  return { calls, pause: () => calls.push('pause'), resume: () => calls.push('resume') };
}

describe('BodyCollector', () => {
  it('joins streamed chunks into a buffer that owns its memory', async () => {
    const collector = new BodyCollector(100, undefined);
    const body = collector.take();
    collector.push(bytes(3, 1), false);
    collector.push(bytes(2, 2), true);
    expect([...(await body)]).toEqual([1, 1, 1, 2, 2]);
    expect((await body).byteOffset).toBe(0);
    expect((await body).buffer.byteLength).toBe(5);
    expect(collector.isComplete).toBe(true);
  });

  it('fills a buffer of the announced length', async () => {
    const collector = new BodyCollector(100, 4);
    const body = collector.take();
    collector.push(bytes(2, 7), false);
    collector.push(bytes(2, 8), true);
    expect([...(await body)]).toEqual([7, 7, 8, 8]);
  });

  it('holds what arrived, never the announced length (a client that announces 10 MiB and sends a trickle holds a trickle)', async () => {
    const collector = new BodyCollector(10 * 1024 * 1024, 10 * 1024 * 1024);
    expect(collector.heldBytes).toBe(0);
    collector.push(bytes(1000, 5), false);
    const body = collector.take();
    expect(collector.heldBytes).toBe(READ_AHEAD_BYTES); // one block like the read-ahead
    collector.push(bytes(10 * 1024 * 1024 - 1000, 6), true);
    const taken = await body;
    expect([taken[0], taken[999], taken[1000], taken.byteLength]).toEqual([5, 5, 6, 10 * 1024 * 1024]);
    expect([taken.byteOffset, taken.buffer.byteLength]).toEqual([0, 10 * 1024 * 1024]); // its own memory
  });

  it('cuts a body that does not keep up: timeoutMs from when it is taken, plus a second per minBytesPerSecond received', async () => {
    vi.useFakeTimers();
    try {
      const brake = flow();
      const collector = new BodyCollector(1024 * 1024, 100_000, brake, { timeoutMs: 1000, minBytesPerSecond: 1000 });
      collector.push(bytes(2000), false); // arrived before it was taken: no clock yet
      await vi.advanceTimersByTimeAsync(60_000);
      const body = collector.take();
      collector.push(bytes(3000), false); // 5,000 bytes: 1 s + 5 s
      await vi.advanceTimersByTimeAsync(5900);
      expect(collector.isSettled).toBe(false);
      await vi.advanceTimersByTimeAsync(200);
      await expect(body).rejects.toMatchObject({ code: 'request_timeout' });
      expect(collector.canDrain).toBe(false); // its connection is closed
      expect(collector.heldBytes).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('hands over a body that arrived whole before it was taken', async () => {
    const collector = new BodyCollector(100, 4);
    collector.push(bytes(4, 9), true);
    expect(collector.isComplete).toBe(true);
    expect([...(await collector.take())]).toEqual([9, 9, 9, 9]);
  });

  it('pauses the engine past the read-ahead until the body is taken', async () => {
    const brake = flow();
    const collector = new BodyCollector(1024 * 1024, undefined, brake);
    collector.push(bytes(READ_AHEAD_BYTES - 1), false);
    expect(brake.calls).toEqual([]);
    collector.push(bytes(1), false);
    expect(brake.calls).toEqual(['pause']);
    const body = collector.take();
    expect(brake.calls).toEqual(['pause', 'resume']);
    collector.push(bytes(10), true);
    expect((await body).byteLength).toBe(READ_AHEAD_BYTES + 10);
  });

  it('never leaves the engine paused once the body ended (its next request must be read)', () => {
    const brake = flow();
    const collector = new BodyCollector(1024 * 1024, 2 * READ_AHEAD_BYTES, brake);
    collector.push(bytes(READ_AHEAD_BYTES), false);
    collector.push(bytes(READ_AHEAD_BYTES), true); // delivered by the engine before the pause took effect
    expect(brake.calls).toEqual(['pause', 'resume']);
    expect(collector.isComplete).toBe(true);
  });

  it('takes an announced body from the allowance as it arrives, and refuses it when it cannot grow', async () => {
    const budget = allowance(50);
    const collector = new BodyCollector(100, 60);
    collector.push(bytes(10), false);
    const body = collector.take(budget);
    expect(budget.asked).toEqual([10]); // the read-ahead, not the 60 announced
    expect(collector.push(bytes(30), false)).toBe(true);
    expect(collector.push(bytes(20), false)).toBe(false); // the engine stops reading
    expect(budget.asked).toEqual([10, 40]);
    await expect(body).rejects.toMatchObject({ code: 'unavailable', retryAfterSeconds: 3 });
    expect(collector.heldBytes).toBe(0);
    expect(collector.canDrain).toBe(true); // the rest can still be read and dropped for the answer
  });

  it('grows the allowance with a body of unannounced length, and refuses it when it cannot grow', async () => {
    const budget = allowance(25);
    const collector = new BodyCollector(100, undefined);
    collector.push(bytes(5), false);
    const body = collector.take(budget);
    expect(collector.push(bytes(10), false)).toBe(true);
    expect(collector.push(bytes(10), false)).toBe(true);
    expect(collector.push(bytes(10), false)).toBe(false);
    expect(budget.asked).toEqual([5, 15, 25]);
    await expect(body).rejects.toMatchObject({ code: 'unavailable' });
    expect(collector.isComplete).toBe(false);
  });

  it('refuses at once when Content-Length is over the cap', async () => {
    const collector = new BodyCollector(100, 101);
    expect(collector.isSettled).toBe(true);
    await expect(collector.take()).rejects.toMatchObject({ code: 'payload_too_large' });
  });

  it('refuses at the first byte past the cap and stops taking chunks', async () => {
    const collector = new BodyCollector(100, undefined);
    expect(collector.push(bytes(100), false)).toBe(true);
    expect(collector.push(bytes(1), false)).toBe(false);
    expect(collector.push(bytes(1), true)).toBe(false);
    await expect(collector.take()).rejects.toMatchObject({ code: 'payload_too_large', message: 'request body exceeds 100 bytes' });
    expect(collector.isComplete).toBe(false);
  });

  it('accepts a body exactly at the cap', async () => {
    const collector = new BodyCollector(100, undefined);
    collector.push(bytes(100), true);
    expect((await collector.take()).byteLength).toBe(100);
  });

  it('refuses a body longer than its Content-Length', async () => {
    const collector = new BodyCollector(100, 2);
    collector.push(bytes(3), true);
    await expect(collector.take()).rejects.toMatchObject({ code: 'bad_request' });
  });
});
