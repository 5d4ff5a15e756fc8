import { describe, expect, it } from 'vitest';
import { ReadGate } from './read-gate.ts';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('ReadGate', () => {
  it("keeps one tenant's flood from holding another tenant's reads, and refuses past its queue", async () => {
    const gate = new ReadGate({ running: 2, waiting: 10, perTenant: 1, perTenantWaiting: 2 });
    const releases = new Map<string, () => void>();
    const started: string[] = [];
    const read = (tenant: string, id: string) => gate.run(tenant, async () => {
      started.push(id);
      await new Promise<void>((resolve) => releases.set(id, resolve));
      return id;
    });
    const flood = [read('a', 'a1'), read('a', 'a2'), read('a', 'a3')];
    const refused = await read('a', 'a4').catch((err) => err);
    expect(refused).toMatchObject({ statusCode: 429, details: { retryAfterSeconds: 1 } });
    const other = read('b', 'b1');
    await tick();
    // a runs one at a time; b is not behind a's queue.
    expect(started).toEqual(['a1', 'b1']);
    releases.get('b1')!();
    expect(await other).toBe('b1');
    for (const id of ['a1', 'a2', 'a3']) {
      await tick();
      releases.get(id)!();
    }
    expect(await Promise.all(flood)).toEqual(['a1', 'a2', 'a3']);
    expect(gate.busyTenants).toBe(0);
  });

  it('refuses with 503 past the process queue, and frees slots after failures', async () => {
    const gate = new ReadGate({ running: 1, waiting: 0, perTenant: 5, perTenantWaiting: 5 });
    let release!: () => void;
    const held = gate.run('a', () => new Promise<void>((resolve) => (release = resolve)));
    await tick();
    expect(await gate.run('b', async () => 'x').catch((err) => err)).toMatchObject({ statusCode: 503 });
    release();
    await held;
    await expect(gate.run('a', async () => { throw new Error('boom'); })).rejects.toThrow('boom');
    expect(await gate.run('a', async () => 'next')).toBe('next');
  });
});
