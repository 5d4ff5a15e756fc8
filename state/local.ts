/**
 * LocalStateStore: the embedded driver. Each bucket is an append-only journal under
 * <dataDir>/state (`<bucket>.log`, one JSON line per change), so a write costs one line however
 * large the bucket is (a day of idempotency records). Lines written together are appended
 * together and made durable with one fdatasync (group commit); a line cut short by a crash is
 * ignored at the next start. When the journal holds mostly superseded lines it is compacted:
 * the live entries are written to a new file that replaces it by rename, so a crash leaves
 * either the old or the new journal. One process owns a data dir at a time (bin/control.ts):
 * other processes go through the owner's control socket, so every check-and-set here is atomic.
 *
 * Earlier versions kept a bucket as one JSON object (`<bucket>.json`); such a file is read once
 * and replaced by a journal.
 */
import { open, readFile, rename, unlink, writeFile, mkdir, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { stateWrite, type StateChange, type StateStore, type Versioned } from './store.ts';

type Listener = (change: StateChange<unknown>) => void;

const BUCKET_NAME = /^[a-z][a-z0-9_-]{0,63}$/;
/** A journal is compacted when it is this much larger than its live lines (and past a floor). */
const COMPACT_RATIO = 2;
const COMPACT_FLOOR_BYTES = 1024 * 1024;
/** How often expired entries are swept from memory and, through compaction, from disk. */
const SWEEP_INTERVAL_MS = 60_000;

interface Entry {
  value: unknown;
  /** When it was written (epoch ms), for expiry. */
  at: number;
  revision: number;
  /** Bytes of its journal line, to know when the journal is mostly dead lines. */
  lineBytes: number;
}

/** One journal line: a put (`v`) or a delete (`d`), with its time. */
interface Line {
  k: string;
  v?: unknown;
  d?: 1;
  t: number;
}

interface Bucket {
  name: string;
  entries: Map<string, Entry>;
  /** The open journal, appended to. */
  file: FileHandle;
  fileBytes: number;
  liveBytes: number;
  /** Lines waiting for the next append, and the callers waiting for them to be durable. */
  queued: string[];
  waiting: Array<{ resolve: () => void; reject: (err: unknown) => void }>;
  flushing: Promise<void> | undefined;
  compactWanted: boolean;
}

/** Whether the journal is mostly superseded lines (and big enough to bother). */
function mostlyDead(bucket: Bucket): boolean {
  return bucket.fileBytes > COMPACT_FLOOR_BYTES && bucket.fileBytes > bucket.liveBytes * COMPACT_RATIO;
}

export class LocalStateStore implements StateStore {
  private readonly buckets = new Map<string, Promise<Bucket>>();
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly ttls = new Map<string, number>();
  /** One counter for every write: a revision read before a write never matches after it. */
  private revisions = 0;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly dir: string, private readonly now: () => number = Date.now) {}

  async start(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS).unref();
  }

  async shutdown(): Promise<void> {
    clearInterval(this.sweeper);
    for (const loading of this.buckets.values()) {
      const bucket = await loading.catch(() => undefined);
      if (!bucket) continue;
      while (bucket.flushing) await bucket.flushing.catch(() => undefined);
      await bucket.file.close().catch(() => undefined);
    }
    this.buckets.clear();
  }

  expireAfter(bucket: string, ttlMs: number): void {
    this.ttls.set(bucket, ttlMs);
  }

  async get<T>(bucket: string, key: string): Promise<T | undefined> {
    const entry = this.live(await this.load(bucket), key);
    // Copies, here as in every read: a caller changing what it got must not change the store.
    return entry ? (structuredClone(entry.value) as T) : undefined;
  }

  async getVersioned<T>(bucket: string, key: string): Promise<Versioned<T> | undefined> {
    const entry = this.live(await this.load(bucket), key);
    return entry ? { value: structuredClone(entry.value) as T, revision: entry.revision } : undefined;
  }

  // Every value came from JSON, so none is unreadable: nothing to report to an onEvent handler.
  async list<T>(bucket: string): Promise<Array<[string, T]>> {
    const loaded = await this.load(bucket);
    const listed: Array<[string, T]> = [];
    for (const key of loaded.entries.keys()) {
      const entry = this.live(loaded, key);
      if (entry) listed.push([key, structuredClone(entry.value) as T]);
    }
    return listed;
  }

  put<T>(bucket: string, key: string, value: T): Promise<void> {
    return stateWrite(async () => void (await this.write(await this.load(bucket), key, value)));
  }

  create<T>(bucket: string, key: string, value: T): Promise<number | undefined> {
    return stateWrite(async () => {
      const loaded = await this.load(bucket);
      // No await between the check and the write: one process owns the data dir.
      if (this.live(loaded, key)) return undefined;
      return this.write(loaded, key, value);
    });
  }

  update<T>(bucket: string, key: string, value: T, revision: number): Promise<number | undefined> {
    return stateWrite(async () => {
      const loaded = await this.load(bucket);
      if (this.live(loaded, key)?.revision !== revision) return undefined;
      return this.write(loaded, key, value);
    });
  }

  delete(bucket: string, key: string): Promise<void> {
    return stateWrite(async () => {
      const loaded = await this.load(bucket);
      if (!loaded.entries.has(key)) return;
      await this.write(loaded, key, undefined);
    });
  }

  watch<T>(bucket: string, onChange: (change: StateChange<T>) => void): () => void {
    const set = this.listeners.get(bucket) ?? new Set<Listener>();
    this.listeners.set(bucket, set);
    set.add(onChange as Listener);
    return () => set.delete(onChange as Listener);
  }

  /** The entry of `key` unless it expired (an expired one is dropped on the way). */
  private live(bucket: Bucket, key: string): Entry | undefined {
    const entry = bucket.entries.get(key);
    if (!entry) return undefined;
    const ttl = this.ttls.get(bucket.name);
    if (ttl === undefined || this.now() - entry.at < ttl) return entry;
    bucket.entries.delete(key);
    bucket.liveBytes -= entry.lineBytes;
    return undefined;
  }

  /**
   * Applies a put (or a delete: value undefined) in memory, tells the watchers once it is
   * durable; resolves to the revision written.
   */
  private async write(bucket: Bucket, key: string, value: unknown): Promise<number> {
    const at = this.now();
    const revision = ++this.revisions;
    const line = JSON.stringify(value === undefined ? { k: key, d: 1, t: at } : { k: key, v: value, t: at }) + '\n';
    const previous = bucket.entries.get(key);
    if (previous) bucket.liveBytes -= previous.lineBytes;
    if (value === undefined) {
      bucket.entries.delete(key);
    } else {
      const lineBytes = Buffer.byteLength(line);
      bucket.entries.set(key, { value: structuredClone(value), at, revision, lineBytes });
      bucket.liveBytes += lineBytes;
    }
    await this.append(bucket, line);
    // Each watcher gets its own copy, detached from the caller's object too.
    for (const listener of this.listeners.get(bucket.name) ?? []) listener({ key, value: structuredClone(value) });
    return revision;
  }

  /** Queues a line; resolves when the append that carried it was made durable. */
  private append(bucket: Bucket, line: string): Promise<void> {
    return new Promise((resolve, reject) => {
      bucket.queued.push(line);
      bucket.waiting.push({ resolve, reject });
      bucket.flushing ??= this.flush(bucket).finally(() => (bucket.flushing = undefined));
    });
  }

  /** Appends everything queued in one write and one fdatasync, until nothing is queued; compacts when due. */
  private async flush(bucket: Bucket): Promise<void> {
    while (bucket.queued.length > 0 || bucket.compactWanted) {
      const text = bucket.queued.join('');
      const waiting = bucket.waiting;
      bucket.queued = [];
      bucket.waiting = [];
      try {
        if (text) {
          await bucket.file.appendFile(text);
          await bucket.file.datasync();
          bucket.fileBytes += Buffer.byteLength(text);
        }
        if (bucket.compactWanted || mostlyDead(bucket)) {
          bucket.compactWanted = false;
          await this.compact(bucket);
        }
        for (const { resolve } of waiting) resolve();
      } catch (err) {
        for (const { reject } of waiting) reject(err);
      }
    }
  }

  /** Rewrites the journal with the live entries only; the rename makes the switch atomic. */
  private async compact(bucket: Bucket): Promise<void> {
    const target = this.file(bucket.name);
    const temp = `${target}.${process.pid}.tmp`;
    const lines: string[] = [];
    let bytes = 0;
    for (const key of [...bucket.entries.keys()]) {
      const entry = this.live(bucket, key);
      if (!entry) continue;
      const line = JSON.stringify({ k: key, v: entry.value, t: entry.at }) + '\n';
      entry.lineBytes = Buffer.byteLength(line);
      bytes += entry.lineBytes;
      lines.push(line);
    }
    await writeFile(temp, lines.join(''), { mode: 0o600, flush: true });
    await rename(temp, target);
    await syncDirectory(this.dir);
    await bucket.file.close();
    bucket.file = await open(target, 'a', 0o600);
    bucket.fileBytes = bytes;
    bucket.liveBytes = bytes;
  }

  /** Drops expired entries; a journal they left mostly dead is compacted (by the flusher, between appends). */
  private async sweep(): Promise<void> {
    for (const [name, loading] of this.buckets) {
      if (!this.ttls.has(name)) continue;
      const bucket = await loading.catch(() => undefined);
      if (!bucket) continue;
      for (const key of [...bucket.entries.keys()]) this.live(bucket, key);
      if (!mostlyDead(bucket)) continue;
      bucket.compactWanted = true;
      bucket.flushing ??= this.flush(bucket).finally(() => (bucket.flushing = undefined));
    }
  }

  private file(bucket: string): string {
    if (!BUCKET_NAME.test(bucket)) throw new Error(`invalid bucket name: ${bucket}`);
    return join(this.dir, `${bucket}.log`);
  }

  private load(bucket: string): Promise<Bucket> {
    let loading = this.buckets.get(bucket);
    if (!loading) {
      loading = this.read(bucket);
      this.buckets.set(bucket, loading);
      // A bucket that could not be read is read again on the next call.
      loading.catch(() => this.buckets.delete(bucket));
    }
    return loading;
  }

  private async read(name: string): Promise<Bucket> {
    const path = this.file(name);
    const entries = new Map<string, Entry>();
    const legacy = join(this.dir, `${name}.json`);
    const legacyText = await readIfExists(legacy);
    if (legacyText !== undefined) {
      for (const [key, value] of Object.entries(JSON.parse(legacyText) as Record<string, unknown>)) {
        entries.set(key, { value, at: this.now(), revision: ++this.revisions, lineBytes: 0 });
      }
    }
    const text = (await readIfExists(path)) ?? '';
    let fileBytes = 0;
    for (const raw of text.split('\n')) {
      fileBytes += Buffer.byteLength(raw) + 1;
      if (!raw) continue;
      let line: Line;
      try {
        line = JSON.parse(raw) as Line;
      } catch {
        continue; // the last line of a crash, cut short: its write was never acknowledged
      }
      if (line.d) entries.delete(line.k);
      else entries.set(line.k, { value: line.v, at: line.t, revision: ++this.revisions, lineBytes: Buffer.byteLength(raw) + 1 });
    }
    const bucket: Bucket = {
      name,
      entries,
      file: await open(path, 'a', 0o600),
      fileBytes: Math.max(0, fileBytes - 1),
      liveBytes: [...entries.values()].reduce((sum, entry) => sum + entry.lineBytes, 0),
      queued: [],
      waiting: [],
      flushing: undefined,
      compactWanted: false,
    };
    if (legacyText !== undefined || (text !== '' && !text.endsWith('\n'))) {
      // Rewrite as a journal (a legacy file, or a torn last line the next append would extend).
      await this.compact(bucket);
      if (legacyText !== undefined) await unlink(legacy);
    }
    return bucket;
  }
}

/** Makes a rename in `dir` durable. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
