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
      const winner = results.findIndex(Boolean);
      expect(await store.get('claims', 'token-1')).toEqual({ by: winner });
      expect(await store.create('claims', 'token-1', { by: 99 })).toBeUndefined();
      await store.delete('claims', 'token-1');
      expect(await store.create('claims', 'token-1', { by: 100 })).toEqual(expect.any(Number));
      expect(await store.get('claims', 'token-1')).toEqual({ by: 100 });
    });

    it('compare-and-set: update writes only at the revision it read', async () => {
      const store = await fresh();
      expect(await store.getVersioned('records', 'r')).toBeUndefined();
      expect(await store.update('records', 'r', { n: 0 }, 1)).toBeUndefined();
      await store.put('records', 'r', { n: 1 });
      const first = (await store.getVersioned<{ n: number }>('records', 'r'))!;
      expect(first.value).toEqual({ n: 1 });
      const written = await store.update('records', 'r', { n: 2 }, first.revision);
      expect(written).toEqual(expect.any(Number));
      // The revision read before that write is stale now.
      expect(await store.update('records', 'r', { n: 3 }, first.revision)).toBeUndefined();
      const second = (await store.getVersioned<{ n: number }>('records', 'r'))!;
      // create and update answer the revision they wrote: the one a reader sees next.
      expect(second).toEqual({ value: { n: 2 }, revision: written });
      expect(second.revision).not.toBe(first.revision);
      await store.delete('records', 'r');
      expect(await store.update('records', 'r', { n: 4 }, second.revision)).toBeUndefined();
      expect(await store.get('records', 'r')).toBeUndefined();
    });

    it('loses no change when writers race on one record with read-modify-write', async () => {
      const store = await fresh();
      await store.put('records', 'form', { recipients: [] as number[] });
      const add = async (n: number) => {
        for (;;) {
          const current = (await store.getVersioned<{ recipients: number[] }>('records', 'form'))!;
          if (await store.update('records', 'form', { recipients: [...current.value.recipients, n] }, current.revision)) return;
        }
      };
      await Promise.all(Array.from({ length: 10 }, (_, n) => add(n)));
      const { recipients } = (await store.get<{ recipients: number[] }>('records', 'form'))!;
      expect([...recipients].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    });

    it('expires the entries of a bucket given a ttl, and only those', async () => {
      const store = await fresh();
      store.expireAfter('short', 1000);
      await store.put('short', 'a', { n: 1 });
      expect(await store.create('short', 'b', { n: 2 })).toEqual(expect.any(Number));
      await store.put('lasting', 'a', { n: 1 });
      expect(await store.get('short', 'a')).toEqual({ n: 1 });
      // Each expires by its own write time: b was written after a, maybe much later on a busy machine.
      await waitFor(async () => (await store.get('short', 'a')) === undefined && (await store.getVersioned('short', 'b')) === undefined, 15_000);
      expect(await store.list('short')).toEqual([]);
      expect(await store.create('short', 'b', { n: 3 })).toEqual(expect.any(Number));
      expect(await store.get('lasting', 'a')).toEqual({ n: 1 });
    });

    it('survives concurrent writes to one bucket', async () => {
      const store = await fresh();
      await Promise.all(Array.from({ length: 50 }, (_, i) => store.put('many', `k${i}`, i)));
      expect((await store.list('many')).length).toBe(50);
    });
  });
}

async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('timed out waiting for watch events');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
