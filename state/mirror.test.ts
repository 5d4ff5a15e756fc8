/** StateMirror over the embedded store: bad values, failing listeners, and races with the watch. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { capturedLog } from '../test/faults.ts';
import { LocalStateStore } from './local.ts';
import { StateMirror } from './mirror.ts';
import { recordOf } from './shape.ts';
import type { StateStore } from './store.ts';

interface Thing {
  name: string;
  n: number;
}
const isThing = recordOf<Thing>({ name: 'string', n: 'number' });

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function localStore(): Promise<LocalStateStore> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-mirror-'));
  dirs.push(dir);
  const store = new LocalStateStore(dir);
  await store.start();
  return store;
}

describe('StateMirror', () => {
  it('counts and skips values of the wrong shape: their key leaves the mirror, logged once without the value', async () => {
    const store = await localStore();
    const { log, lines, entries } = capturedLog();
    await store.put('things', 'present', { name: 'secret-looking value', n: 'not a number' });
    await store.put('things', 'good', { name: 'a', n: 1 });
    const mirror = new StateMirror(store, 'things', { validate: isThing, log });
    const seen: Array<[string, Thing | undefined]> = [];
    mirror.onChange((key, value) => seen.push([key, value]));
    expect(mirror.status()).toMatchObject({ ok: false, detail: 'starting' });
    await mirror.start();
    expect(mirror.values()).toEqual([{ name: 'a', n: 1 }]);

    await store.put('things', 'good', null);
    await store.put('things', 'good', [1, 2]);
    await store.put('things', 'other', { name: 'b', n: 2 });
    expect(mirror.get('good')).toBeUndefined();
    expect(mirror.get('other')).toEqual({ name: 'b', n: 2 });
    // The index saw the good key leave when its value became unreadable: nothing stale stays in force.
    expect(seen).toEqual([['good', { name: 'a', n: 1 }], ['good', undefined], ['other', { name: 'b', n: 2 }]]);
    expect(mirror.status()).toEqual({
      ok: true,
      detail: '3 unreadable values skipped (keys in the log)',
      figures: { entries: 1, badValues: 3, restarts: 0, listenerErrors: 0 },
    });
    const warnings = entries().filter((entry) => entry.msg === 'skipped a stored value that cannot be read');
    expect(warnings.map((entry) => [entry.bucket, entry.recordKey, entry.reason])).toEqual([
      ['things', 'present', 'wrong shape'],
      ['things', 'good', 'wrong shape'],
    ]);
    expect(lines.join('\n')).not.toContain('secret-looking');

    // A good value heals the key; a later bad one is logged again.
    await store.put('things', 'good', { name: 'a', n: 3 });
    expect(mirror.get('good')).toEqual({ name: 'a', n: 3 });
    await store.put('things', 'good', 'garbage');
    expect(entries().filter((entry) => entry.recordKey === 'good' && entry.reason === 'wrong shape')).toHaveLength(2);
    mirror.stop();
    expect(mirror.status()).toMatchObject({ ok: false, detail: 'stopped' });
  });

  it('catches and counts a change listener that throws; the other listeners and later changes go on', async () => {
    const store = await localStore();
    const { log, entries } = capturedLog();
    const mirror = new StateMirror(store, 'things', { validate: isThing, log });
    const healthy: string[] = [];
    mirror.onChange((key) => {
      if (key === 'poison') throw new Error('index cannot take this');
    });
    mirror.onChange((key) => healthy.push(key));
    await mirror.start();
    await store.put('things', 'poison', { name: 'p', n: 0 });
    await store.put('things', 'after', { name: 'q', n: 1 });
    await mirror.set('mine', { name: 'r', n: 2 });
    expect(healthy).toEqual(['poison', 'after', 'mine']);
    expect(mirror.get('after')).toEqual({ name: 'q', n: 1 });
    expect(mirror.status()).toMatchObject({ ok: true, figures: { listenerErrors: 1 } });
    expect(mirror.status().detail).toContain('index cannot take this');
    expect(entries().some((entry) => entry.msg === 'a state change listener failed; the mirror goes on' && entry.recordKey === 'poison')).toBe(true);
  });

  it('a change the watch brings while the first list is read beats the older listed value', async () => {
    const store = await localStore();
    await store.put('things', 'k', { name: 'old', n: 1 });
    // The list is read, then a change lands before the mirror gets the list's answer.
    const racing: StateStore = Object.assign(Object.create(store) as StateStore, {
      list: async <T>(bucket: string) => {
        const listed = await store.list<T>(bucket);
        await store.put('things', 'k', { name: 'new', n: 2 });
        return listed;
      },
    });
    const mirror = new StateMirror(racing, 'things', { validate: isThing, log: capturedLog().log });
    await mirror.start();
    expect(mirror.get('k')).toEqual({ name: 'new', n: 2 });
  });

  it('a local write does not overwrite a newer change another process made while it was in flight', async () => {
    const store = await localStore();
    // Another gateway writes the same key after ours, before our put returns.
    const racing: StateStore = Object.assign(Object.create(store) as StateStore, {
      put: async <T>(bucket: string, key: string, value: T) => {
        await store.put(bucket, key, value);
        await store.put(bucket, key, { name: 'elsewhere', n: 9 });
      },
    });
    const mirror = new StateMirror(racing, 'things', { validate: isThing, log: capturedLog().log });
    await mirror.start();
    await mirror.set('k', { name: 'ours', n: 1 });
    expect(mirror.get('k')).toEqual({ name: 'elsewhere', n: 9 });
    expect(await store.get('things', 'k')).toEqual({ name: 'elsewhere', n: 9 });
  });

  it('shows its own writes at once when its watch is slow to bring them', async () => {
    const store = await localStore();
    const deaf: StateStore = Object.assign(Object.create(store) as StateStore, { watch: () => () => {} });
    const mirror = new StateMirror(deaf, 'things', { validate: isThing, log: capturedLog().log });
    await mirror.start();
    await mirror.set('k', { name: 'ours', n: 1 });
    expect(mirror.get('k')).toEqual({ name: 'ours', n: 1 });
    await mirror.delete('k');
    expect(mirror.get('k')).toBeUndefined();
    expect(await store.get('things', 'k')).toBeUndefined();
  });
});
