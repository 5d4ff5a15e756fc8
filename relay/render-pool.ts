/**
 * The worker threads that render large messages (renderer.ts sends them): a small pool of their
 * own, so a render never waits behind ingestion's decoding nor ingestion behind a render. The
 * roles that deliver (serve, deliver) start it; anywhere else (a gateway's previews, the CLI) it
 * starts on first use.
 */
import { fileURLToPath } from 'node:url';
import { SluiceError } from '../core/errors.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { BundledPool } from '../pipeline/bundled-pool.ts';
import type { RenderRequest, RenderResult } from './render.ts';
import type { RenderRunner } from './renderer.ts';
import type { SanitizedBody } from './sanitize.ts';

/** Threads at most: one kept, a second while renders queue. */
export const RENDER_THREADS = 2;
/** How long the second thread idles before it stops. */
const IDLE_THREAD_MS = 60_000;
/**
 * Renders waiting for a thread, at most: past it a render is refused (503) rather than queued.
 * A preview's body leaves the byte budget once it is parsed, and previews are not rate-limited:
 * without this an admin could queue any number of them, each holding its data. As many as the
 * delivery attempts a process runs at once by default.
 */
export const RENDER_QUEUE = 64;

export interface RenderPoolOptions {
  /** Renders waiting for a thread, at most (default RENDER_QUEUE). */
  maxQueue?: number;
  /** Each thread's heap limit, MiB (SLUICE_WORKER_HEAP_MB); default DEFAULT_WORKER_HEAP_MB. */
  maxHeapMb?: number;
  /** Called when a thread ran out of memory (it is replaced; its render failed with 503). */
  onOutOfMemory?: () => void;
}

/** The render threads: a BundledPool of render-worker.ts, started once, stopped for good. */
export class RenderPool implements RenderRunner {
  private readonly threads: BundledPool;
  private readonly maxQueue: number;
  private stopped = false;

  constructor({ maxQueue = RENDER_QUEUE, maxHeapMb, onOutOfMemory }: RenderPoolOptions = {}) {
    this.maxQueue = maxQueue;
    this.threads = new BundledPool({
      entry: fileURLToPath(new URL('./render-worker.ts', import.meta.url)),
      name: 'the render pool',
      minThreads: 1,
      maxThreads: RENDER_THREADS,
      idleTimeoutMs: IDLE_THREAD_MS,
      maxHeapMb,
      onOutOfMemory,
    });
  }

  /** Bundles the worker and starts a thread; resolves once it has loaded the code. */
  start(): Promise<void> {
    if (this.stopped) return Promise.reject(this.unavailable());
    return this.threads.start();
  }

  async shutdown(): Promise<void> {
    this.stopped = true;
    await this.threads.shutdown();
  }

  /** Ready while it runs, and before its first use; not once a start failed. */
  status(): ComponentStatus {
    return this.threads.started ? this.threads.status() : { ok: true, detail: 'not started: starts on first use' };
  }

  run(request: RenderRequest): Promise<RenderResult> {
    return this.submit(request);
  }

  sanitize(html: string): Promise<SanitizedBody> {
    return this.submit(html, 'sanitize');
  }

  /** A task on the threads, if their queue has room: checked and queued in one step, so concurrent callers cannot all pass. */
  private async submit<T>(task: unknown, name?: string): Promise<T> {
    await this.start();
    const pool = this.threads.piscina;
    if (!pool || this.stopped) throw this.unavailable();
    if (pool.queueSize >= this.maxQueue) throw new SluiceError('unavailable', `the render pool is busy (${this.maxQueue} renders waiting)`, { retryAfterSeconds: 1 });
    return this.threads.run<T>(task, name ? { name } : {});
  }

  private unavailable(): SluiceError {
    return new SluiceError('unavailable', 'the render pool is stopped', { retryAfterSeconds: 5 });
  }
}
