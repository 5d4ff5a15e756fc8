/**
 * MemoryGuard: holds the process to its memory budget (SLUICE_MEMORY_BUDGET_MB) by watching its
 * resident set. The budget's split (core/memory-budget.ts) bounds each part by its own limit;
 * this is the bound on the sum, whatever the cause (an allocator that keeps freed memory, a
 * figure of the split that does not hold on another machine). From a high-water mark below the
 * budget, kept free for the work already under way (an insert, a merge, the requests admitted),
 * new work is refused: requests get 503 + Retry-After at admission (core/byte-budget.ts asks
 * refusal()) and the local log's inserts into chDB wait (hasRoom()), which lets chDB give its
 * memory back. It clears once the resident set is a step below the mark again.
 *
 * The resident set is read every SAMPLE_MS on a timer (process.memoryUsage.rss(): one read of
 * /proc/self/statm), and afresh by hasRoom() before each insert.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { SluiceError } from './errors.ts';
import type { ComponentStatus } from './readiness.ts';

const MiB = 1024 * 1024;

/** How often the resident set is read. */
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
  /** Work is refused from this resident set on (default: the budget less an eighth, at least 32 MiB below it). */
  highWaterBytes?: number;
  retryAfterSeconds: number;
  /** Reads the resident set (tests inject one). */
  rss?: () => number;
  now?: () => number;
  /** Called on every refusal (the metrics counter). */
  onRefusal?: () => void;
  /** Ask V8 for a full collection of the main thread's heap at the high-water mark (default true; tests of the thresholds turn it off). */
  collectGarbage?: boolean;
}

export interface MemoryGuardFigures {
  rssBytes: number;
  /** The highest resident set seen by the guard's samples. */
  peakRssBytes: number;
  budgetBytes: number;
  highWaterBytes: number;
  refusals: number;
  /** Times an insert into storage waited for memory. */
  insertWaits: number;
  /** Full collections of the main thread's heap the guard asked for. */
  collections: number;
}

export class MemoryGuard {
  private readonly readRss: () => number;
  private readonly now: () => number;
  readonly highWaterBytes: number;
  /** The resident set at which an over-budget state clears. */
  private readonly clearBytes: number;
  /** From this resident set on, the main thread's heap is collected (at most every COLLECT_EVERY_MS). */
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
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: MemoryGuardOptions) {
    this.readRss = options.rss ?? (() => process.memoryUsage.rss());
    this.now = options.now ?? Date.now;
    const { budgetBytes } = options;
    this.highWaterBytes = options.highWaterBytes ?? budgetBytes - Math.max(32 * MiB, Math.floor(budgetBytes / 8));
    this.clearBytes = this.highWaterBytes - Math.max(8 * MiB, Math.floor((budgetBytes - this.highWaterBytes) / 2));
    // Garbage is collected before it takes the process to its high-water mark, not after.
    this.collectBytes = this.highWaterBytes - (budgetBytes - this.highWaterBytes);
    this.sample();
  }

  /** Starts sampling on a timer (it does not keep the process alive). */
  start(): void {
    this.timer ??= setInterval(() => this.sample(), SAMPLE_MS).unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The refusal for new work while the process is at its budget (counted), else undefined. */
  refusal(): SluiceError | undefined {
    if (!this.over) return undefined;
    this.refused++;
    this.lastRefusalAt = this.now();
    this.options.onRefusal?.();
    return new SluiceError('unavailable', `the process is at its memory budget (SLUICE_MEMORY_BUDGET_MB: ${mib(this.rss)} resident of ${mib(this.options.budgetBytes)}): try again later`, {
      retryAfterSeconds: this.options.retryAfterSeconds,
    });
  }

  /** Whether storage work may start now (read afresh); a wait is counted. */
  hasRoom(): boolean {
    this.sample();
    if (this.over) this.waits++;
    return !this.over;
  }

  get figures(): MemoryGuardFigures {
    return {
      rssBytes: this.rss,
      peakRssBytes: this.peak,
      budgetBytes: this.options.budgetBytes,
      highWaterBytes: this.highWaterBytes,
      refusals: this.refused,
      insertWaits: this.waits,
      collections: this.collections,
    };
  }

  /** Always ok (refusing is its job, not a fault, as the in-flight budget's); says so while it refuses. */
  status(): ComponentStatus {
    const figures = { ...this.figures };
    if (this.over || this.now() - this.lastRefusalAt < REPORT_MS) {
      return { ok: true, detail: `at the memory budget (${mib(this.rss)} resident of ${mib(this.options.budgetBytes)}): ingestion is refused with 503 and inserts into storage wait until it is under ${mib(this.clearBytes)}`, figures };
    }
    return { ok: true, figures };
  }

  private sample(): void {
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
