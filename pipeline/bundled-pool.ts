/**
 * A piscina pool running one worker entry, bundled to JavaScript as the pool starts
 * (core/worker-bundle.ts) and removed when it stops: the pipeline's pool and the relay's render pool
 * are each one of these. A thread that dies is replaced by piscina from the same bundle.
 *
 * Each thread's heap has a limit of its own (maxHeapMb): a task that needs more ends its
 * thread, not the process. Without one a thread could grow to the main thread's limit, each of
 * them, and a process whose heap outgrows the machine is ended by the kernel, all of it. The
 * tasks the thread held fail with a retryable `unavailable` (503): the one that ran it out of
 * memory and the next one already sent to it cannot be told apart.
 */
import { Piscina } from 'piscina';
import { SluiceError } from '../core/errors.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { bundleWorker, type WorkerBundle } from '../core/worker-bundle.ts';

/** Heap (V8's old generation) of each worker thread by default, in MiB: SLUICE_WORKER_HEAP_MB. */
export const DEFAULT_WORKER_HEAP_MB = 512;

/** How long a client refused because a thread ran out of memory (or the pool is stopped) is asked to wait. */
const RETRY_AFTER_SECONDS = 1;

/** What a BundledPool runs and with how many threads. */
export interface BundledPoolOptions {
  /** The worker's TypeScript entry (a file path): its default export runs tasks, its `warm` export answers a start-up task. */
  entry: string;
  /** Threads kept running (each is warmed at start), and the most it may run. */
  minThreads: number;
  maxThreads: number;
  /** Tasks a thread holds at once (default 1). */
  concurrentTasksPerWorker?: number;
  /** How long a thread above minThreads may idle before it stops (ms; default: never). */
  idleTimeoutMs?: number;
  /** Each thread's heap limit (V8's old generation), MiB; default DEFAULT_WORKER_HEAP_MB. */
  maxHeapMb?: number;
  /** What the threads do, for messages: `the worker pool`, `the render pool`. */
  name: string;
  /** Called when a thread ran out of memory (after it was replaced): the owner logs and counts it. */
  onOutOfMemory?: () => void;
  /** What each thread's `warm` task is given (default null). */
  warmTask?: unknown;
}

/** A piscina pool of one bundled entry, with start(), shutdown() and status() for the composition root. */
export class BundledPool {
  private pool: Piscina | undefined;
  private bundle: WorkerBundle | undefined;
  private starting: Promise<void> | undefined;
  /** Threads that ran out of memory since the pool was made. */
  private outOfMemory = 0;
  /** Their errors: piscina fails every task a thread held with the same one, counted once. */
  private readonly outOfMemoryErrors = new WeakSet<object>();
  /** What the `warm` task answered in each thread started with the pool. */
  warmAnswers: unknown[] = [];

  constructor(private readonly options: BundledPoolOptions) {}

  /** The running pool; undefined before start() resolved and after shutdown(). */
  get piscina(): Piscina | undefined {
    return this.pool;
  }

  /** Whether start() was called since the last shutdown(). */
  get started(): boolean {
    return this.starting !== undefined;
  }

  /** Bundles the entry and starts the threads; resolves once each of minThreads has loaded the code. */
  start(): Promise<void> {
    this.starting ??= this.startThreads();
    return this.starting;
  }

  private async startThreads(): Promise<void> {
    const { entry, minThreads, maxThreads, concurrentTasksPerWorker = 1, idleTimeoutMs = Infinity, maxHeapMb = DEFAULT_WORKER_HEAP_MB } = this.options;
    this.bundle = await bundleWorker(entry);
    this.pool = new Piscina({
      filename: this.bundle.url,
      minThreads,
      maxThreads,
      idleTimeout: idleTimeoutMs,
      concurrentTasksPerWorker,
      resourceLimits: { maxOldGenerationSizeMb: maxHeapMb },
      // Its run and wait time histograms (two clock reads and a record per task) are read by no one.
      recordTiming: false,
    });
    // Warm the threads so the first tasks do not wait for one to start.
    this.warmAnswers = await Promise.all(Array.from({ length: minThreads }, () => this.pool!.run(this.options.warmTask ?? null, { name: 'warm' })));
  }

  /**
   * Runs a task on a thread of the running pool (start() resolved). A thread that runs out of
   * memory on it (or on another task it held) fails it with `unavailable`; piscina starts
   * another thread in its place.
   */
  async run<T>(task: unknown, options: { name?: string; transferList?: ArrayBuffer[] } = {}): Promise<T> {
    if (!this.pool) throw new SluiceError('unavailable', `${this.options.name} is not running`, { retryAfterSeconds: RETRY_AFTER_SECONDS });
    try {
      return (await this.pool.run(task, options)) as T;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ERR_WORKER_OUT_OF_MEMORY') throw err;
      if (!this.outOfMemoryErrors.has(err as object)) {
        this.outOfMemoryErrors.add(err as object);
        this.outOfMemory++;
        this.options.onOutOfMemory?.();
      }
      const limit = this.options.maxHeapMb ?? DEFAULT_WORKER_HEAP_MB;
      throw new SluiceError('unavailable', `a thread of ${this.options.name} ran out of memory (its heap limit is ${limit} MiB) on this request or one it held; it was replaced`, { cause: err, retryAfterSeconds: RETRY_AFTER_SECONDS });
    }
  }

  /** Stops the threads, once a start under way has finished (or failed), and removes the bundle. */
  async shutdown(): Promise<void> {
    await this.starting?.catch(() => {});
    this.starting = undefined;
    await this.pool?.destroy();
    this.pool = undefined;
    await this.bundle?.remove();
    this.bundle = undefined;
  }

  /** Ready while its threads run (piscina replaces a thread that died); figures for operators. */
  status(): ComponentStatus {
    if (!this.pool) return { ok: false, detail: 'the worker pool is not running' };
    const figures = { threads: this.pool.threads.length, queued: this.pool.queueSize, utilization: Math.round(this.pool.utilization * 100) / 100, outOfMemory: this.outOfMemory };
    if (figures.threads === 0 && this.options.minThreads > 0) return { ok: false, detail: 'no worker thread is running', figures };
    return { ok: true, figures };
  }
}
