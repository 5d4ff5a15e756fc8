/**
 * The contract every StateStore driver passes (local now; NATS KV in cluster mode).
 * Call describeStateStore from a driver's test file with a factory for a fresh, empty store.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { StateChange, StateStore } from './store.ts';

export function describeStateStore(driver: string, createStore: () => Promise<StateStore>): void {
  describe(`StateStore contract: ${driver}`, () => {
    const stores: StateStore[] = [];
    const fresh = async () => {
      const store = await createStore();
      await store.start();
      stores.push(store);
      return store;
    };
    afterEach(async () => {
      for (const store of stores.splice(0)) await store.shutdown();
    });

    it('puts, gets, lists and deletes JSON values', async () => {
      const store = await fresh();
      expect(await store.get('things', 'a')).toBeUndefined();
      await store.put('things', 'a', { n: 1, tags: ['x'] });
      await store.put('things', 'b', { n: 2 });
      expect(await store.get('things', 'a')).toEqual({ n: 1, tags: ['x'] });
      expect(new Map(await store.list('things'))).toEqual(new Map([['a', { n: 1, tags: ['x'] }], ['b', { n: 2 }]]));
      await store.delete('things', 'a');
      expect(await store.get('things', 'a')).toBeUndefined();
      expect(await store.list('other')).toEqual([]);
    });

    it('returns copies: mutating a stored value does not change the store', async () => {
      const store = await fresh();
      const value = { n: 1 };
      await store.put('things', 'a', value);
      value.n = 2;
      expect(await store.get('things', 'a')).toEqual({ n: 1 });
    });

    it('hands out copies: mutating what get, list or a watch returned does not change the store', async () => {
      const store = await fresh();
      const watched: Array<StateChange<{ n: number; tags: string[] }>> = [];
      const alsoWatched: Array<StateChange<{ n: number; tags: string[] }>> = [];
      const stop = store.watch<{ n: number; tags: string[] }>('things', (change) => watched.push(change));
      const stopToo = store.watch<{ n: number; tags: string[] }>('things', (change) => alsoWatched.push(change));
      await store.put('things', 'a', { n: 1, tags: ['x'] });
      await waitFor(() => watched.length >= 1 && alsoWatched.length >= 1);
      watched[0]!.value!.n = 2;
      watched[0]!.value!.tags.push('from a watcher');
      const got = (await store.get<{ n: number; tags: string[] }>('things', 'a'))!;
      got.n = 3;
      got.tags.push('from get');
      const [[, listed]] = (await store.list<{ n: number; tags: string[] }>('things')) as [[string, { n: number; tags: string[] }]];
      listed.n = 4;
      listed.tags.push('from list');
      expect(await store.get('things', 'a')).toEqual({ n: 1, tags: ['x'] });
      expect(await store.list('things')).toEqual([['a', { n: 1, tags: ['x'] }]]);
      expect(alsoWatched[0]!.value).toEqual({ n: 1, tags: ['x'] });
      stop();
      stopToo();
    });

    it('tells watchers about puts and deletes until they stop watching', async () => {
      const store = await fresh();
      const seen: Array<StateChange<{ n: number }>> = [];
      const stop = store.watch<{ n: number }>('things', (change) => seen.push(change));
      await store.put('things', 'a', { n: 1 });
      await store.delete('things', 'a');
      await waitFor(() => seen.length >= 2);
      expect(seen).toEqual([{ key: 'a', value: { n: 1 } }, { key: 'a', value: undefined }]);
      stop();
      await store.put('things', 'b', { n: 2 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(seen).toHaveLength(2);
    });

    it('creates a key once: concurrent creates have exactly one winner, and a deleted key can be created again', async () => {
      const store = await fresh();
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => store.create('claims', 'token-1', { by: i })));
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = results.indexOf(true);
      expect(await store.get('claims', 'token-1')).toEqual({ by: winner });
      expect(await store.create('claims', 'token-1', { by: 99 })).toBe(false);
      await store.delete('claims', 'token-1');
      expect(await store.create('claims', 'token-1', { by: 100 })).toBe(true);
      expect(await store.get('claims', 'token-1')).toEqual({ by: 100 });
    });

    it('survives concurrent writes to one bucket', async () => {
      const store = await fresh();
      await Promise.all(Array.from({ length: 50 }, (_, i) => store.put('many', `k${i}`, i)));
      expect((await store.list('many')).length).toBe(50);
    });
  });
}

async function waitFor(condition: () => boolean, timeoutMs = 2_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for watch events');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
