/**
 * LocalStateStore: the embedded driver. Each bucket is one JSON file under
 * <dataDir>/state, rewritten atomically (write to a temp file, then rename) on every change,
 * so a crash leaves either the old or the new version. One process owns a data dir at a time
 * (see bin/control.ts): other processes go through the owner's control socket.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { StateChange, StateStore } from './store.ts';

type Listener = (change: StateChange<unknown>) => void;

const BUCKET_NAME = /^[a-z][a-z0-9_-]{0,63}$/;

export class LocalStateStore implements StateStore {
  private readonly buckets = new Map<string, Map<string, unknown>>();
  private readonly listeners = new Map<string, Set<Listener>>();
  /** Writes of one bucket are serialised so an older snapshot never overwrites a newer one. */
  private readonly writes = new Map<string, Promise<void>>();

  constructor(private readonly dir: string) {}

  async start(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
  }

  async shutdown(): Promise<void> {
    await Promise.all(this.writes.values());
  }

  async get<T>(bucket: string, key: string): Promise<T | undefined> {
    // Copies, here as in every read: a caller changing what it got must not change the store.
    return structuredClone((await this.load(bucket)).get(key)) as T | undefined;
  }

  // Every value came from JSON, so none is unreadable: nothing to report to an onEvent handler.
  async list<T>(bucket: string): Promise<Array<[string, T]>> {
    return [...(await this.load(bucket))].map(([key, value]) => [key, structuredClone(value) as T]);
  }

  async put<T>(bucket: string, key: string, value: T): Promise<void> {
    const entries = await this.load(bucket);
    entries.set(key, structuredClone(value));
    await this.persist(bucket, entries);
    this.emit(bucket, { key, value });
  }

  async create<T>(bucket: string, key: string, value: T): Promise<boolean> {
    const entries = await this.load(bucket);
    // No await between the check and the set: one process owns the data dir.
    if (entries.has(key)) return false;
    entries.set(key, structuredClone(value));
    await this.persist(bucket, entries);
    this.emit(bucket, { key, value });
    return true;
  }

  async delete(bucket: string, key: string): Promise<void> {
    const entries = await this.load(bucket);
    if (!entries.delete(key)) return;
    await this.persist(bucket, entries);
    this.emit(bucket, { key, value: undefined });
  }

  watch<T>(bucket: string, onChange: (change: StateChange<T>) => void): () => void {
    const set = this.listeners.get(bucket) ?? new Set<Listener>();
    this.listeners.set(bucket, set);
    set.add(onChange as Listener);
    return () => set.delete(onChange as Listener);
  }

  private emit(bucket: string, change: StateChange<unknown>): void {
    // Each watcher gets its own copy, detached from the caller's object too.
    for (const listener of this.listeners.get(bucket) ?? []) listener({ key: change.key, value: structuredClone(change.value) });
  }

  private file(bucket: string): string {
    if (!BUCKET_NAME.test(bucket)) throw new Error(`invalid bucket name: ${bucket}`);
    return join(this.dir, `${bucket}.json`);
  }

  private async load(bucket: string): Promise<Map<string, unknown>> {
    let entries = this.buckets.get(bucket);
    if (entries) return entries;
    let text: string | undefined;
    try {
      text = await readFile(this.file(bucket), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    // Another caller may have loaded the bucket while we were reading.
    entries = this.buckets.get(bucket) ?? new Map(Object.entries(text ? JSON.parse(text) : {}));
    this.buckets.set(bucket, entries);
    return entries;
  }

  private persist(bucket: string, entries: Map<string, unknown>): Promise<void> {
    const snapshot = JSON.stringify(Object.fromEntries(entries), null, 1);
    const previous = this.writes.get(bucket) ?? Promise.resolve();
    const next = previous.then(async () => {
      const target = this.file(bucket);
      const temp = `${target}.${process.pid}.tmp`;
      await writeFile(temp, snapshot, { mode: 0o600 });
      await rename(temp, target);
    });
    this.writes.set(bucket, next.catch(() => undefined));
    return next;
  }
}
