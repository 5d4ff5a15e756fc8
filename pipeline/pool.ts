/**
 * The worker pool (piscina). Request bodies are transferred in, row buffers transferred out.
 * Its queue needs no bound of its own: every body in it holds a reservation of the process's
 * byte budget (core/byte-budget.ts), which refuses new requests with 503 when it is used up.
 */
import { Piscina } from 'piscina';
import { SluiceError } from '../core/errors.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import type { PipelineTask, TaskResult } from './tasks.ts';

export interface PipelinePoolOptions {
  workers: number;
  retryAfterSeconds: number;
}

export class PipelinePool {
  private pool: Piscina | undefined;

  constructor(private readonly options: PipelinePoolOptions) {}

  async start(): Promise<void> {
    this.pool = new Piscina({
      filename: new URL('./worker.mjs', import.meta.url).href,
      minThreads: this.options.workers,
      maxThreads: this.options.workers,
      idleTimeout: Infinity,
      // One task at a time per thread: a thread reuses its buffers from task to task (tasks.ts).
      concurrentTasksPerWorker: 1,
    });
    // Warm every worker so the first requests do not pay tsx's compile.
    await Promise.all(Array.from({ length: this.options.workers }, () => this.pool!.run(null, { name: 'warm' })));
  }

  async shutdown(): Promise<void> {
    await this.pool?.destroy();
    this.pool = undefined;
  }

  /** Ready while its threads run (piscina replaces a thread that died); figures for operators. */
  status(): ComponentStatus {
    if (!this.pool) return { ok: false, detail: 'the worker pool is not running' };
    const figures = { threads: this.pool.threads.length, queued: this.pool.queueSize, utilization: Math.round(this.pool.utilization * 100) / 100 };
    if (figures.threads === 0) return { ok: false, detail: 'no worker thread is running', figures };
    return { ok: true, figures };
  }

  async run(task: PipelineTask): Promise<TaskResult> {
    if (!this.pool) throw new SluiceError('unavailable', 'pipeline is not running', { retryAfterSeconds: this.options.retryAfterSeconds });
    // Transfer only a buffer the body owns whole; a view into a shared buffer is copied.
    const owned = task.body.byteOffset === 0 && task.body.byteLength === task.body.buffer.byteLength;
    return this.pool.run(task, { transferList: owned ? [task.body.buffer as ArrayBuffer] : [] });
  }
}
