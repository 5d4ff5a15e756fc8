import { appendFile, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalStateStore } from './local.ts';
import { describeStateStore } from './store.suite.ts';

const dirs: string[] = [];
const newDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-state-'));
  dirs.push(dir);
  return dir;
};
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describeStateStore('local', async () => new LocalStateStore(await newDir()));

describe('LocalStateStore', () => {
  it('reports a write it cannot make (its directory gone) as unavailable, so callers answer 503, not 500', async () => {
    const dir = await newDir();
    const store = new LocalStateStore(dir);
    await store.start();
    // Where the new bucket's journal would go, a file: no journal can be written.
    await rm(dir, { recursive: true, force: true });
    await writeFile(dir, 'not a directory');
    await expect(store.put('fresh', 'one', { n: 1 })).rejects.toMatchObject({ name: 'SluiceError', code: 'unavailable' });
    await expect(store.create('fresh', 'two', { n: 2 })).rejects.toMatchObject({ name: 'SluiceError', code: 'unavailable' });
    await store.shutdown();
    await rm(dir, { force: true });
  });

  it('keeps its data across restarts', async () => {
    const dir = await newDir();
    const first = new LocalStateStore(dir);
    await first.start();
    await first.put('sources', 'a', { name: 'web' });
    await first.shutdown();
    const second = new LocalStateStore(dir);
    await second.start();
    expect(await second.get('sources', 'a')).toEqual({ name: 'web' });
  });

  it('appends a line per write, and compacts a journal of mostly superseded lines', async () => {
    const dir = await newDir();
    const store = new LocalStateStore(dir);
    await store.start();
    const value = { payload: 'x'.repeat(1000) };
    // 3,000 writes of ~1 KB to 10 keys: 3 MB of lines, 10 KB of them live.
    for (let round = 0; round < 300; round++) await Promise.all(Array.from({ length: 10 }, (_, k) => store.put('busy', `k${k}`, { ...value, round })));
    const size = (await stat(join(dir, 'busy.log'))).size;
    expect(size).toBeLessThan(2.5 * 1024 * 1024);
    await store.shutdown();
    const reopened = new LocalStateStore(dir);
    await reopened.start();
    expect((await reopened.list<{ round: number }>('busy')).map(([, v]) => v.round)).toEqual(Array(10).fill(299));
  });

  it('ignores a last line cut short by a crash, and keeps everything before it', async () => {
    const dir = await newDir();
    const store = new LocalStateStore(dir);
    await store.start();
    await store.put('things', 'a', { n: 1 });
    await store.put('things', 'b', { n: 2 });
    await store.shutdown();
    await appendFile(join(dir, 'things.log'), '{"k":"c","v":{"n":');
    const reopened = new LocalStateStore(dir);
    await reopened.start();
    expect(new Map(await reopened.list('things'))).toEqual(new Map([['a', { n: 1 }], ['b', { n: 2 }]]));
    await reopened.put('things', 'c', { n: 3 });
    await reopened.shutdown();
    const again = new LocalStateStore(dir);
    await again.start();
    expect(await again.get('things', 'c')).toEqual({ n: 3 });
  });

  it('reads a bucket written by an earlier version (one JSON object) and turns it into a journal', async () => {
    const dir = await newDir();
    await writeFile(join(dir, 'sources.json'), JSON.stringify({ a: { name: 'web' } }));
    const store = new LocalStateStore(dir);
    await store.start();
    expect(await store.get('sources', 'a')).toEqual({ name: 'web' });
    await expect(stat(join(dir, 'sources.json'))).rejects.toThrow(/ENOENT/);
    expect(await readFile(join(dir, 'sources.log'), 'utf8')).toContain('"web"');
  });

  it('expires entries by the time of their last write (injected clock)', async () => {
    let now = 1_000_000;
    const store = new LocalStateStore(await newDir(), () => now);
    await store.start();
    store.expireAfter('tokens', 60_000);
    await store.put('tokens', 'a', 1);
    now += 30_000;
    await store.put('tokens', 'b', 2);
    now += 30_000;
    expect(await store.get('tokens', 'a')).toBeUndefined();
    expect(await store.get('tokens', 'b')).toBe(2);
    now += 30_000;
    expect(await store.list('tokens')).toEqual([]);
  });

  it('refuses bucket names that could escape its directory', async () => {
    const store = new LocalStateStore(await newDir());
    await store.start();
    await expect(store.put('../evil', 'a', 1)).rejects.toThrow(/invalid bucket/);
  });
});
