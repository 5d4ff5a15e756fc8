import { describe, expect, it } from 'vitest';
import { BodyCollector } from './body.ts';

const bytes = (n: number, fill = 1) => new Uint8Array(n).fill(fill);

describe('BodyCollector', () => {
  it('joins streamed chunks into a buffer that owns its memory', async () => {
    const collector = new BodyCollector(100, undefined);
    collector.push(bytes(3, 1), false);
    collector.push(bytes(2, 2), true);
    const body = await collector.done;
    expect([...body]).toEqual([1, 1, 1, 2, 2]);
    expect(body.byteOffset).toBe(0);
    expect(body.buffer.byteLength).toBe(5);
    expect(collector.isComplete).toBe(true);
  });

  it('fills a preallocated buffer when the length is announced', async () => {
    const collector = new BodyCollector(100, 4);
    collector.push(bytes(2, 7), false);
    collector.push(bytes(2, 8), true);
    expect([...(await collector.done)]).toEqual([7, 7, 8, 8]);
  });

  it('refuses at once when Content-Length is over the cap', async () => {
    const collector = new BodyCollector(100, 101);
    expect(collector.isSettled).toBe(true);
    await expect(collector.done).rejects.toMatchObject({ code: 'payload_too_large' });
  });

  it('refuses at the first byte past the cap and stops taking chunks', async () => {
    const collector = new BodyCollector(100, undefined);
    expect(collector.push(bytes(100), false)).toBe(true);
    expect(collector.push(bytes(1), false)).toBe(false);
    expect(collector.push(bytes(1), true)).toBe(false);
    await expect(collector.done).rejects.toMatchObject({ code: 'payload_too_large', message: 'request body exceeds 100 bytes' });
    expect(collector.isComplete).toBe(false);
  });

  it('accepts a body exactly at the cap', async () => {
    const collector = new BodyCollector(100, undefined);
    collector.push(bytes(100), true);
    expect((await collector.done).byteLength).toBe(100);
  });

  it('refuses a body longer than its Content-Length', async () => {
    const collector = new BodyCollector(100, 2);
    collector.push(bytes(3), true);
    await expect(collector.done).rejects.toMatchObject({ code: 'bad_request' });
  });
});
