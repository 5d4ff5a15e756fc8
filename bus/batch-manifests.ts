/**
 * The batch manifests of the storage consumers, indexed in memory. Every consumer keeps the
 * index fresh from a KV watch, so a message can be checked against every batch of the last
 * hour without a KV round trip: a message that comes back after it was stored — redelivered,
 * or reappearing because a nats-server killed with SIGKILL lost the acks it had not yet
 * written — is recognised and acked instead of being inserted again.
 */
import { KvWatchInclude, type KV } from '@nats-io/kv';

export interface Manifest {
  token: string;
  seqs: number[];
  state: 'pending' | 'committed';
}

interface Indexed {
  key: string;
  /** When this process learnt of it: entries leave the index when the bucket's TTL drops them. */
  at: number;
  stream: string;
  min: number;
  max: number;
  manifest: Manifest;
}

export class ManifestIndex {
  private readonly byKey = new Map<string, Indexed>();
  private stopWatch: (() => void) | undefined;

  /** @param maxAgeMs the bucket's TTL: KV drops expired manifests without telling watchers. */
  constructor(readonly kv: KV, private readonly maxAgeMs: number) {}

  /** Loads the manifests there are and follows every later change. */
  async start(): Promise<void> {
    const updates = await this.kv.watch({ include: KvWatchInclude.UpdatesOnly });
    this.stopWatch = () => updates.stop();
    void (async () => {
      for await (const entry of updates) this.apply(entry.key, entry.operation === 'PUT' ? entry.json<Manifest>() : undefined);
    })();
    for await (const key of await this.kv.keys()) {
      const entry = await this.kv.get(key);
      if (entry?.operation === 'PUT' && !this.byKey.has(key)) this.apply(key, entry.json<Manifest>());
    }
  }

  stop(): void {
    this.stopWatch?.();
  }

  /** Records a manifest this process wrote (the watch would bring it a moment later). */
  apply(key: string, manifest: Manifest | undefined): void {
    if (!manifest) {
      this.byKey.delete(key);
      return;
    }
    const stream = key.slice(0, key.lastIndexOf('.'));
    const now = Date.now();
    this.byKey.delete(key); // re-inserted last, so the map stays in arrival order for pruning
    this.byKey.set(key, { key, stream, at: now, min: Math.min(...manifest.seqs), max: Math.max(...manifest.seqs), manifest });
    for (const [oldKey, entry] of this.byKey) {
      if (now - entry.at <= this.maxAgeMs) break;
      this.byKey.delete(oldKey);
    }
  }

  /** The manifest whose batch holds message `seq` of `stream`, if any. */
  find(stream: string, seq: number): { key: string; manifest: Manifest } | undefined {
    for (const entry of this.byKey.values()) {
      if (entry.stream === stream && seq >= entry.min && seq <= entry.max && entry.manifest.seqs.includes(seq)) return entry;
    }
    return undefined;
  }
}
