/**
 * NatsKvStateStore: the cluster driver of the state store. Each bucket is a NATS KV bucket, so
 * every gateway sees the same sources, key hashes and configs, and a watch on the bucket
 * brings a change made anywhere (a revoked key) to every gateway within milliseconds.
 * Anyone with access to the bucket can write any bytes into it, and every gateway reads them
 * at once: a value that is not JSON is skipped and reported, never thrown (core/bad-values.ts),
 * and a watch is kept open from the last revision it saw (core/kv-watch.ts).
 * The store does not own the NATS connection: whoever connected closes it.
 */
import { Kvm, type KV, type KvEntry } from '@nats-io/kv';
import { errors, type NatsConnection } from '@nats-io/transport-node';
import { BadValues } from '../core/bad-values.ts';
import { SluiceError } from '../core/errors.ts';
import { noStreamYet, revisionConflict, streamNotFound } from '../core/jetstream-errors.ts';
import { KvWatch, readJson } from '../core/kv-watch.ts';
import { fallbackLogger, type Logger } from '../core/log.ts';
import { sleep } from '../core/supervisor.ts';
import { stateWrite, type StateChange, type StateEventHandler, type StateStore, type Versioned } from './store.ts';

export interface NatsKvStateStoreOptions {
  /** Prefix of the KV bucket names, so deployments (or tests) can share a server. Default 'sluice_'. */
  bucketPrefix?: string;
  /** Replicas of each bucket: 3 on a 3-node JetStream cluster. Default 1. */
  replicas?: number;
  /** Where skipped values and re-opened watches are logged. Default: warnings to stderr. */
  log?: Logger;
  /** First pause before a watch that ended is re-opened (it doubles up to 30 s). Default 250 ms. */
  watchMinBackoffMs?: number;
  /**
   * How long a read is tried again while its bucket cannot answer: a bucket with no leader
   * (an election after a node died, a few seconds) times out or answers 503. Default 15000 ms.
   */
  readPatienceMs?: number;
  /** How often a watch is checked against its bucket, and re-opened when it delivered nothing while the bucket moved on (core/kv-watch.ts). Default 15 s. */
  watchAuditMs?: number;
}

/**
 * Whether a failed read may succeed if tried again soon: no answer, JetStream between leaders,
 * or a bucket's stream not found (after every node restarted, a node answers so for a stream it
 * has not loaded yet; the store created its buckets, so one truly gone is refused after the patience).
 */
const transient = (err: unknown) => err instanceof errors.TimeoutError || noStreamYet(err) || streamNotFound(err);

/** KV keys allow [-/_=.a-zA-Z0-9]; anything else (and our marker '=') is stored base64url-encoded. */
const SAFE_KEY = /^[-/_.a-zA-Z0-9]+$/;
const encodeKey = (key: string) => (SAFE_KEY.test(key) ? key : '=' + Buffer.from(key).toString('base64url'));
const decodeKey = (key: string) => (key.startsWith('=') ? Buffer.from(key.slice(1), 'base64url').toString() : key);

export class NatsKvStateStore implements StateStore {
  private readonly kvm: Kvm;
  private readonly buckets = new Map<string, Promise<KV>>();
  /** Watches being set up: reads and writes of a bucket wait for them, so none misses a change. */
  private readonly settingUp = new Map<string, Set<Promise<void>>>();
  /** Stops of the open watches; each resolves when its loop has ended. */
  private readonly stops = new Set<() => Promise<void>>();
  private readonly badValues = new Map<string, BadValues>();
  /** Buckets whose entries expire (ms after their last write): the KV bucket's max age. */
  private readonly ttls = new Map<string, number>();
  private readonly prefix: string;
  private readonly replicas: number;
  private readonly log: Logger;

  constructor(nc: NatsConnection, private readonly options: NatsKvStateStoreOptions = {}) {
    this.kvm = new Kvm(nc);
    this.prefix = options.bucketPrefix ?? 'sluice_';
    this.replicas = options.replicas ?? 1;
    this.log = options.log ?? fallbackLogger();
  }

  async start(): Promise<void> {}

  async shutdown(): Promise<void> {
    await Promise.all([...this.stops].map((stop) => stop()));
  }

  async get<T>(bucket: string, key: string): Promise<T | undefined> {
    const entry = await this.read(async () => (await this.open(bucket)).get(encodeKey(key)));
    return entry && entry.operation === 'PUT' ? this.decode<T>(bucket, entry) : undefined;
  }

  async getVersioned<T>(bucket: string, key: string): Promise<Versioned<T> | undefined> {
    const entry = await this.read(async () => (await this.open(bucket)).get(encodeKey(key)));
    if (!entry || entry.operation !== 'PUT') return undefined;
    const value = this.decode<T>(bucket, entry);
    return value === undefined ? undefined : { value, revision: entry.revision };
  }

  update<T>(bucket: string, key: string, value: T, revision: number): Promise<number | undefined> {
    return stateWrite(() => this.updateOrConflict(bucket, key, value, revision));
  }

  private async updateOrConflict<T>(bucket: string, key: string, value: T, revision: number): Promise<number | undefined> {
    try {
      // A publish expecting the key's last sequence to be `revision`: the server checks it.
      return await (await this.open(bucket)).update(encodeKey(key), JSON.stringify(value), revision);
    } catch (err) {
      if (revisionConflict(err)) return undefined;
      throw err;
    }
  }

  expireAfter(bucket: string, ttlMs: number): void {
    this.ttls.set(bucket, ttlMs);
  }

  put<T>(bucket: string, key: string, value: T): Promise<void> {
    return stateWrite(async () => void (await (await this.open(bucket)).put(encodeKey(key), JSON.stringify(value))));
  }

  create<T>(bucket: string, key: string, value: T): Promise<number | undefined> {
    return stateWrite(() => this.createOrTaken(bucket, key, value));
  }

  private async createOrTaken<T>(bucket: string, key: string, value: T): Promise<number | undefined> {
    try {
      // KV create is a publish expecting the key's last sequence to be a delete or none.
      return await (await this.open(bucket)).create(encodeKey(key), JSON.stringify(value));
    } catch (err) {
      if (revisionConflict(err)) return undefined;
      throw err;
    }
  }

  delete(bucket: string, key: string): Promise<void> {
    return stateWrite(async () => (await this.open(bucket)).delete(encodeKey(key)));
  }

  async list<T>(bucket: string, onEvent?: StateEventHandler): Promise<Array<[string, T]>> {
    const read = await this.read(async () => {
      const kv = await this.open(bucket);
      const keys: string[] = [];
      for await (const key of await kv.keys()) keys.push(key);
      const entries: KvEntry[] = [];
      for (const key of keys) {
        const entry = await kv.get(key);
        if (entry && entry.operation === 'PUT') entries.push(entry);
      }
      return entries;
    });
    const entries: Array<[string, T]> = [];
    for (const entry of read) {
      const value = this.decode<T>(bucket, entry);
      if (value === undefined) onEvent?.({ type: 'bad_value', key: decodeKey(entry.key) });
      else entries.push([decodeKey(entry.key), value]);
    }
    return entries;
  }

  /**
   * Runs a read, again while it fails for want of an answer (up to readPatienceMs), and turns
   * its failure into `unavailable`: the caller answers 503 + Retry-After, never 500.
   */
  private async read<T>(attempt: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + (this.options.readPatienceMs ?? 15_000);
    for (let pauseMs = 250; ; pauseMs = Math.min(2 * pauseMs, 2000)) {
      try {
        return await attempt();
      } catch (err) {
        if (err instanceof SluiceError) throw err;
        if (!transient(err) || Date.now() + pauseMs > deadline) {
          throw new SluiceError('unavailable', `the state store could not be read: ${(err as Error).message}`, { cause: err });
        }
        await sleep(pauseMs);
      }
    }
  }

  watch<T>(bucket: string, onChange: (change: StateChange<T>) => void, onEvent?: StateEventHandler): () => void {
    const follower = new KvWatch(
      () => this.bucket(bucket),
      (entry) => {
        const key = decodeKey(entry.key);
        if (entry.operation !== 'PUT') return onChange({ key, value: undefined });
        const value = this.decode<T>(bucket, entry);
        if (value === undefined) onEvent?.({ type: 'bad_value', key });
        else onChange({ key, value });
      },
      {
        name: `state watch ${bucket}`,
        log: this.log,
        minBackoffMs: this.options.watchMinBackoffMs,
        auditMs: this.options.watchAuditMs,
        onInterrupted: (reason) => onEvent?.({ type: 'interrupted', reason }),
        onResumed: () => onEvent?.({ type: 'resumed' }),
      },
    );
    // Left in the set until its loop has ended, so shutdown() waits for it.
    const stop = () => follower.stop().finally(() => this.stops.delete(stop));
    this.stops.add(stop);
    this.track(bucket, follower.start());
    return () => void stop();
  }

  /** Opens (creating it if needed) the KV bucket, with the max age expireAfter asked for. */
  private async createBucket(name: string): Promise<KV> {
    const ttl = this.ttls.get(name);
    // Reads from the bucket's leader, not by direct get: any replica may answer a direct get, one
    // behind among them, and then a record just written reads as missing (a source created and
    // then "no source") and a compare-and-set reads an old revision. Hot reads use the mirrors.
    const kv = await this.kvm.create(this.prefix + name, { replicas: this.replicas, history: 1, allow_direct: false, ...(ttl ? { ttl } : {}) });
    // An existing bucket keeps its config through create(): bring its max age in line.
    if (ttl !== undefined && (await kv.status()).ttl !== ttl) {
      const jsm = await this.kvm.js.jetstreamManager();
      const info = await jsm.streams.info(`KV_${this.prefix}${name}`);
      await jsm.streams.update(info.config.name, { ...info.config, max_age: ttl * 1_000_000 });
    }
    return kv;
  }

  /** The JSON value of a put; undefined (logged once per key, never the value) when it is not JSON. */
  private decode<T>(bucket: string, entry: KvEntry): T | undefined {
    const key = decodeKey(entry.key);
    let bad = this.badValues.get(bucket);
    const json = readJson(entry);
    if (json) {
      bad?.clear(key);
      return json.value as T;
    }
    if (!bad) this.badValues.set(bucket, (bad = new BadValues(this.log, { bucket: this.prefix + bucket })));
    bad.note(key, 'not JSON');
    return undefined;
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
      kv = this.createBucket(name);
      this.buckets.set(name, kv);
      // A failed create (server unreachable) is retried on the next call, not cached.
      kv.catch(() => this.buckets.delete(name));
    }
    return kv;
  }
}
