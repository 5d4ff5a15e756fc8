import { describe, expect, it } from 'vitest';
import { ClickHouseException } from './errors.ts';
import { queryGate } from './gate.ts';

describe('queryGate', () => {
  it('runs at most `running` tasks at once, the rest in order, and refuses past `waiting`', async () => {
    const gate = queryGate(2, 2);
    const releases: Array<() => void> = [];
    const started: number[] = [];
    const task = (id: number) => gate.run(async () => {
      started.push(id);
      await new Promise<void>((resolve) => releases[id] = resolve);
      return id;
    });
    const results = [task(0), task(1), task(2), task(3)];
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual([0, 1]);

    const refused = await task(4).catch((err) => err);
    expect(refused).toBeInstanceOf(ClickHouseException);
    expect(refused).toMatchObject({ code: 202, status: 503 });

    releases[1]!();
    await results[1];
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual([0, 1, 2]);
    releases[0]!();
    releases[2]!();
    await new Promise((resolve) => setImmediate(resolve));
    releases[3]!();
    expect(await Promise.all(results)).toEqual([0, 1, 2, 3]);
    // All slots given back: two run at once again.
    const again = [task(5), task(6)];
    await new Promise((resolve) => setImmediate(resolve));
    expect(started.slice(-2)).toEqual([5, 6]);
    releases[5]!();
    releases[6]!();
    await Promise.all(again);
  });

  it('gives the slot back when a task fails', async () => {
    const gate = queryGate(1, 0);
    await expect(gate.run(async () => { throw new Error('boom'); })).rejects.toThrow('boom');
    expect(await gate.run(async () => 'next')).toBe('next');
  });
});
