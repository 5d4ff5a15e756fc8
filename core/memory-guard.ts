/**
 * MemoryGuard: holds the process to its memory budget (SLUICE_MEMORY_BUDGET_MB) by watching its
 * resident set. The budget's split (core/memory-budget.ts) bounds each part by its own limit;
 * this is the bound on the sum, whatever the cause (an allocator that keeps freed memory, a
 * figure of the split that does not hold on another machine). Three marks below the budget:
 *
 *   refuse   requests get 503 + Retry-After at admission (core/byte-budget.ts asks refusal()),
 *            until the resident set is a step below the mark again; the room above it is for
 *            the work under way (requests admitted, a merge);
 *   storage  the local log's inserts into chDB wait (hasRoom()), which lets chDB give memory
 *            back; rows keep going into the log meanwhile (it is on disk), which refuses when
 *            full. It sits well under the refuse mark: the engine's inserts and merges are most
 *            of what moves the resident set, and holding them keeps ingestion open;
 *   collect  the main thread's heap is collected (see fullCollection()).
 *
 * The resident set (process.memoryUsage.rss(): a read of /proc/self/stat) is read when the guard
 * is asked — a request's admission, readiness, the metrics — if the last read is SAMPLE_MS old,
 * and afresh by hasRoom() before each insert. Not on a timer: memory grows with work, and work
 * asks; a timer woke every process 20 times a second for nothing while it idled (a consumer
 * waiting on its storage, a gateway between bursts), and a wake-up costs some 70 µs of CPU on
 * the 2-core VMs measured (`node --import tsx bench/idle.ts`).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { SluiceError } from './errors.ts';
import type { ComponentStatus } from './readiness.ts';

const MiB = 1024 * 1024;

/** A read of the resident set younger than this answers the guard's questions. */
const SAMPLE_MS = 50;

/** How long status() keeps saying "at the budget" after a refusal. */
const REPORT_MS = 10_000;

/** The least time between two full collections the guard asks for. */
const COLLECT_EVERY_MS = 500;

/**
 * A full collection of the main thread's heap, asked for when the process reaches its high-water
 * mark. The main thread has no heap limit of its own (V8's is a share of the machine's memory,
 * 4 GiB here), and Sluice starts with --no-memory-reducer, so under a flood of refused requests
 * V8 let its garbage grow past 100 MiB before collecting it; collected, the pages go back to the
 * kernel within a second or two. (V8 gives `gc` only to contexts made after --expose-gc is set.)
 */
function fullCollection(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

export interface MemoryGuardOptions {
  /** The budget, bytes of resident memory. */
  budgetBytes: number;
  retryAfterSeconds: number;
  /** Reads the resident set (tests inject one). */
  rss?: () => number;
  now?: () => number;
  /** Called on every refusal (the metrics counter). */
  onRefusal?: () => void;
  /** Ask V8 for a full collection of the main thread's heap at the collect mark (default true; tests of the marks turn it off). */
  collectGarbage?: boolean;
}

export interface MemoryGuardFigures {
  rssBytes: number;
  /** The highest resident set seen by the guard's samples. */
  peakRssBytes: number;
  budgetBytes: number;
  /** From here requests are refused. */
  highWaterBytes: number;
  /** From here inserts into storage wait. */
  storageMarkBytes: number;
  refusals: number;
  /** Times an insert into storage waited for memory. */
  insertWaits: number;
  /** Full collections of the main thread's heap the guard asked for. */
  collections: number;
}

export class MemoryGuard {
  private readonly readRss: () => number;
  private readonly now: () => number;
  /** The refuse mark, and where refusing stops. */
  readonly highWaterBytes: number;
  private readonly clearBytes: number;
  /** The storage mark. */
  readonly storageMarkBytes: number;
  /** The collect mark. */
  private readonly collectBytes: number;
  private rss = 0;
  private peak = 0;
  private over = false;
  private refused = 0;
  private waits = 0;
  private collections = 0;
  private lastRefusalAt = -Infinity;
  private lastCollectionAt = -Infinity;
  private collect: (() => void) | undefined;
  private sampledAt = -Infinity;

  constructor(private readonly options: MemoryGuardOptions) {
    this.readRss = options.rss ?? (() => process.memoryUsage.rss());
    this.now = options.now ?? Date.now;
    const { budgetBytes } = options;
    // 768 MiB: refuse from 720 (to 704), hold inserts from 640, collect from 576.
    this.highWaterBytes = budgetBytes - Math.max(16 * MiB, Math.floor(budgetBytes / 16));
    this.clearBytes = this.highWaterBytes - Math.max(8 * MiB, Math.floor(budgetBytes / 48));
    this.storageMarkBytes = budgetBytes - Math.max(32 * MiB, Math.floor(budgetBytes / 6));
    this.collectBytes = this.storageMarkBytes - Math.floor((budgetBytes - this.storageMarkBytes) / 2);
    this.sample();
  }

  /** The refusal for new work while the process is at its budget (counted), else undefined. */
  refusal(): SluiceError | undefined {
    this.sampleIfStale();
    if (!this.over) return undefined;
    this.refused++;
    this.lastRefusalAt = this.now();
    this.options.onRefusal?.();
    return new SluiceError('unavailable', `the process is at its memory budget (SLUICE_MEMORY_BUDGET_MB: ${mib(this.rss)} resident of ${mib(this.options.budgetBytes)}): try again later`, {
      retryAfterSeconds: this.options.retryAfterSeconds,
    });
  }

  /** Whether an insert into storage may start now (the resident set read afresh); a wait is counted. */
  hasRoom(): boolean {
    this.sample();
    const room = this.rss < this.storageMarkBytes;
    if (!room) this.waits++;
    return room;
  }

  get figures(): MemoryGuardFigures {
    this.sampleIfStale();
    return {
      rssBytes: this.rss,
      peakRssBytes: this.peak,
      budgetBytes: this.options.budgetBytes,
      highWaterBytes: this.highWaterBytes,
      storageMarkBytes: this.storageMarkBytes,
      refusals: this.refused,
      insertWaits: this.waits,
      collections: this.collections,
    };
  }

  /** Always ok (refusing is its job, not a fault, as the in-flight budget's); says so while it refuses or holds inserts. */
  status(): ComponentStatus {
    const figures = { ...this.figures };
    const at = `${mib(this.rss)} resident of ${mib(this.options.budgetBytes)}`;
    if (this.over || this.now() - this.lastRefusalAt < REPORT_MS) {
      return { ok: true, detail: `at the memory budget (${at}): ingestion is refused with 503 until it is under ${mib(this.clearBytes)}, inserts into storage wait`, figures };
    }
    if (this.rss >= this.storageMarkBytes) {
      return { ok: true, detail: `near the memory budget (${at}): inserts into storage wait until it is under ${mib(this.storageMarkBytes)}`, figures };
    }
    return { ok: true, figures };
  }

  private sampleIfStale(): void {
    if (this.now() - this.sampledAt >= SAMPLE_MS) this.sample();
  }

  private sample(): void {
    this.sampledAt = this.now();
    this.rss = this.readRss();
    this.peak = Math.max(this.peak, this.rss);
    if (this.rss >= this.highWaterBytes) this.over = true;
    else if (this.rss < this.clearBytes) this.over = false;
    if (this.rss >= this.collectBytes && this.options.collectGarbage !== false && this.now() - this.lastCollectionAt >= COLLECT_EVERY_MS) {
      this.lastCollectionAt = this.now();
      this.collections++;
      (this.collect ??= fullCollection())();
    }
  }
}

function mib(bytes: number): string {
  return `${Math.round(bytes / MiB)} MiB`;
}
