import { describe, expect, it } from 'vitest';
import { PayloadPool } from './payload-pool.ts';

describe('PayloadPool', () => {
  it('cuts payloads from slabs of the next power of two and lends a released slab to the next payload of its size', () => {
    const pool = new PayloadPool(64, 1024, 4096);
    const [a, b, c] = [pool.take(1000), pool.take(100), pool.take(128)];
    expect([a.length, b.length, c.length]).toEqual([1000, 100, 128]);
    expect([a.buffer.byteLength, b.buffer.byteLength, c.buffer.byteLength]).toEqual([1024, 128, 128]);
    // A view of a payload (the data after its headers) gives back the whole slab.
    pool.release(a.subarray(100));
    pool.release(b);
    expect(pool.freeSlabBytes).toBe(1024 + 128);
    const again = pool.take(70);
    expect(again.buffer).toBe(b.buffer);
    expect(again.byteOffset).toBe(0);
    expect(pool.take(513).buffer).toBe(a.buffer);
    expect(pool.take(513).buffer).not.toBe(a.buffer);
    expect(pool.freeSlabBytes).toBe(0);
  });

  it('keeps at most maxFreeBytes in free slabs', () => {
    const pool = new PayloadPool(64, 1024, 2048);
    const taken = [pool.take(1024), pool.take(1024), pool.take(1024)];
    for (const payload of taken) pool.release(payload);
    expect(pool.freeSlabBytes).toBe(2048);
  });

  it('serves smaller and larger payloads with memory of their own and takes back only its own slabs', () => {
    const pool = new PayloadPool(64, 1024, 4096);
    const [small, big] = [pool.take(7), pool.take(4096)];
    expect([small.length, big.length]).toEqual([7, 4096]);
    pool.release(small);
    pool.release(big);
    pool.release(Buffer.alloc(1024));
    pool.release(Buffer.allocUnsafe(128)); // a slice of Node's shared pool
    expect(pool.freeSlabBytes).toBe(0);
  });

  it('refuses a slab released twice while it is free', () => {
    const pool = new PayloadPool(64, 1024, 4096);
    const payload = pool.take(100);
    pool.release(payload);
    expect(() => pool.release(payload)).toThrow(/released twice/);
  });
});
