/**
 * NatsKvStateStore: the cluster driver of the state store. Each bucket is a NATS KV bucket, so
 * every gateway sees the same sources, key hashes and configs, and a watch on the bucket
 * brings a change made anywhere (a revoked key) to every gateway within milliseconds.
 * The store does not own the NATS connection: whoever connected closes it.
 */
import { KvWatchInclude, Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { StateChange, StateStore } from './store.ts';

export interface NatsKvStateStoreOptions {
  /** Prefix of the KV bucket names, so deployments (or tests) can share a server. Default 'sluice_'. */
  bucketPrefix?: string;
  /** Replicas of each bucket: 3 on a 3-node JetStream cluster. Default 1. */
  replicas?: number;
}

/** KV keys allow [-/_=.a-zA-Z0-9]; anything else (and our marker '=') is stored base64url-encoded. */
const SAFE_KEY = /^[-/_.a-zA-Z0-9]+$/;
const encodeKey = (key: string) => (SAFE_KEY.test(key) ? key : '=' + Buffer.from(key).toString('base64url'));
const decodeKey = (key: string) => (key.startsWith('=') ? Buffer.from(key.slice(1), 'base64url').toString() : key);

export class NatsKvStateStore implements StateStore {
  private readonly kvm: Kvm;
  private readonly buckets = new Map<string, Promise<KV>>();
  /** Watches being set up: reads and writes of a bucket wait for them, so none misses a change. */
  private readonly settingUp = new Map<string, Set<Promise<void>>>();
  private readonly stops = new Set<() => void>();
  private readonly prefix: string;
  private readonly replicas: number;

  constructor(nc: NatsConnection, options: NatsKvStateStoreOptions = {}) {
    this.kvm = new Kvm(nc);
    this.prefix = options.bucketPrefix ?? 'sluice_';
    this.replicas = options.replicas ?? 1;
  }

  async start(): Promise<void> {}

  async shutdown(): Promise<void> {
    for (const stop of this.stops) stop();
    this.stops.clear();
  }

  async get<T>(bucket: string, key: string): Promise<T | undefined> {
    const entry = await (await this.open(bucket)).get(encodeKey(key));
    return entry && entry.operation === 'PUT' ? entry.json<T>() : undefined;
  }

  async put<T>(bucket: string, key: string, value: T): Promise<void> {
    await (await this.open(bucket)).put(encodeKey(key), JSON.stringify(value));
  }

  async create<T>(bucket: string, key: string, value: T): Promise<boolean> {
    try {
      // KV create is a publish expecting the key's last sequence to be a delete or none.
      await (await this.open(bucket)).create(encodeKey(key), JSON.stringify(value));
      return true;
    } catch (err) {
      if (/wrong last sequence|key exists/i.test((err as Error).message)) return false;
      throw err;
    }
  }

  async delete(bucket: string, key: string): Promise<void> {
    await (await this.open(bucket)).delete(encodeKey(key));
  }

  async list<T>(bucket: string): Promise<Array<[string, T]>> {
    const kv = await this.open(bucket);
    const keys: string[] = [];
    for await (const key of await kv.keys()) keys.push(key);
    const entries: Array<[string, T]> = [];
    for (const key of keys) {
      const entry = await kv.get(key);
      if (entry && entry.operation === 'PUT') entries.push([decodeKey(key), entry.json<T>()]);
    }
    return entries;
  }

  watch<T>(bucket: string, onChange: (change: StateChange<T>) => void): () => void {
    let stopped = false;
    let stopIterator: (() => void) | undefined;
    const stop = () => {
      stopped = true;
      stopIterator?.();
      this.stops.delete(stop);
    };
    this.stops.add(stop);
    const ready = (async () => {
      const kv = await this.bucket(bucket);
      const updates = await kv.watch({ include: KvWatchInclude.UpdatesOnly });
      stopIterator = () => updates.stop();
      if (stopped) updates.stop();
      return updates;
    })();
    const setUp = ready.then(() => undefined, () => undefined);
    this.track(bucket, setUp);
    void ready.then(async (updates) => {
      for await (const entry of updates) {
        if (stopped) break;
        onChange({ key: decodeKey(entry.key), value: entry.operation === 'PUT' ? entry.json<T>() : undefined });
      }
    });
    return stop;
  }

  private track(bucket: string, setUp: Promise<void>): void {
    const pending = this.settingUp.get(bucket) ?? new Set<Promise<void>>();
    this.settingUp.set(bucket, pending);
    pending.add(setUp);
    void setUp.then(() => pending.delete(setUp));
  }

  /** The bucket, once every watch on it that was asked for before is in place. */
  private async open(bucket: string): Promise<KV> {
    await Promise.all(this.settingUp.get(bucket) ?? []);
    return this.bucket(bucket);
  }

  private bucket(name: string): Promise<KV> {
    let kv = this.buckets.get(name);
    if (!kv) {
      kv = this.kvm.create(this.prefix + name, { replicas: this.replicas, history: 1 });
      this.buckets.set(name, kv);
      // A failed create (server unreachable) is retried on the next call, not cached.
      kv.catch(() => this.buckets.delete(name));
    }
    return kv;
  }
}
