import { mkdtemp, rm } from 'node:fs/promises';
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

  it('refuses bucket names that could escape its directory', async () => {
    const store = new LocalStateStore(await newDir());
    await store.start();
    await expect(store.put('../evil', 'a', 1)).rejects.toThrow(/invalid bucket/);
  });
});
