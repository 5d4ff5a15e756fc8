/**
 * A piscina pool running one worker entry, bundled to JavaScript as the pool starts
 * (worker-bundle.ts) and removed when it stops: the pipeline's pool and the relay's render pool
 * are each one of these. A thread that dies is replaced by piscina from the same bundle.
 */
import { Piscina } from 'piscina';
import type { ComponentStatus } from '../core/readiness.ts';
import { bundleWorker, type WorkerBundle } from './worker-bundle.ts';

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
}

/** A piscina pool of one bundled entry, with start(), shutdown() and status() for the composition root. */
export class BundledPool {
  private pool: Piscina | undefined;
  private bundle: WorkerBundle | undefined;
  private starting: Promise<void> | undefined;

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
    const { entry, minThreads, maxThreads, concurrentTasksPerWorker = 1, idleTimeoutMs = Infinity } = this.options;
    this.bundle = await bundleWorker(entry);
    this.pool = new Piscina({
      filename: this.bundle.url,
      minThreads,
      maxThreads,
      idleTimeout: idleTimeoutMs,
      concurrentTasksPerWorker,
      // Its run and wait time histograms (two clock reads and a record per task) are read by no one.
      recordTiming: false,
    });
    // Warm the threads so the first tasks do not wait for one to start.
    await Promise.all(Array.from({ length: minThreads }, () => this.pool!.run(null, { name: 'warm' })));
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
    const figures = { threads: this.pool.threads.length, queued: this.pool.queueSize, utilization: Math.round(this.pool.utilization * 100) / 100 };
    if (figures.threads === 0 && this.options.minThreads > 0) return { ok: false, detail: 'no worker thread is running', figures };
    return { ok: true, figures };
  }
}
