/**
 * The worker pool (piscina). Request bodies are transferred in, row buffers transferred out.
 * Its queue needs no bound of its own: every body in it holds a reservation of the process's
 * byte budget (core/byte-budget.ts), which refuses new requests with 503 when it is used up.
 *
 * Row buffers go round: once the bus is done with a request's rows, their buffers come back
 * (recycle) and travel to a worker with the next task, which writes rows into them again. A
 * new buffer per request would be new memory to fault in, in the worker, and external memory
 * for the main thread's collector, which ran full collections for it several times a second.
 * A transferred buffer is detached here, so a reference left behind sees no bytes, never
 * another request's. Spares are few and bounded (here and in each worker) and, like the
 * row writers, outside the byte budget.
 */
import { fileURLToPath } from 'node:url';
import { SluiceError } from '../core/errors.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { BundledPool } from './bundled-pool.ts';
import type { BatchTask, PipelineTask, TaskResult } from './tasks.ts';
import type { TranscoderSetting, TranscoderStatus } from './wasm/select.ts';
import type { Fallback } from './wasm/transcoder.ts';

export interface PipelinePoolOptions {
  workers: number;
  retryAfterSeconds: number;
  /** Each thread's heap limit, MiB (SLUICE_WORKER_HEAP_MB); default DEFAULT_WORKER_HEAP_MB. */
  maxHeapMb?: number;
  /** Called when a thread ran out of memory (it is replaced; its tasks got 503). */
  onOutOfMemory?: () => void;
  /** The OTLP transcoder the threads run (SLUICE_TRANSCODER, wasm/select.ts); default js. */
  transcoder?: TranscoderSetting;
  /** Called for each request the WebAssembly transcoder could not serve (JavaScript did): the owner logs and counts it. */
  onTranscoderFallback?: (fallback: Fallback) => void;
}

interface Waiting {
  task: PipelineTask;
  resolve: (result: TaskResult) => void;
  reject: (err: unknown) => void;
}

/**
 * Tasks (batches) a worker holds at once: the one it runs and the next, already in its port. A worker
 * that finishes then goes on without sleeping; with one, it slept after every task until the
 * main thread heard of the result and woke it with the next: a sleep and a wake per request
 * even at saturation, and a wake cost 70–120 µs of CPU on the 2-vCPU virtual machine the bench
 * runs on (bench/wakeups.ts; bench/HISTORY.md, "Worker wake-ups").
 * The tasks still run one after the other: a task's synchronous part (tasks.ts) is never
 * interleaved with another's.
 */
const TASKS_PER_WORKER = 2;
/** Spare buffers sent with each task, and kept here at most per worker. */
const SPARES_PER_TASK = 2;
const SPARES_PER_WORKER = 4;
/** Smaller buffers are not worth the trip; larger ones (rare) are not worth keeping. */
const MIN_SPARE_BYTES = 16 * 1024;
const MAX_SPARE_BYTES = 4 * 1024 * 1024;

export class PipelinePool {
  private readonly threads: BundledPool;
  private readonly transcoderSetting: TranscoderSetting;
  private starting: Promise<void> | undefined;
  /** Buffers of rows the bus is done with, waiting for a task to carry them to a worker. */
  private spares: ArrayBuffer[] = [];
  /** Requests handed over in this turn of the event loop, posted together at its end. */
  private waiting: Waiting[] = [];
  /** Requests decoded, and the messages (batches) that carried them to the threads. */
  private readonly sent = { requests: 0, messages: 0 };
  /** The OTLP transcoder the threads run, once they started. */
  transcoder: TranscoderStatus | undefined;

  constructor(private readonly options: PipelinePoolOptions) {
    const { workers, maxHeapMb, onOutOfMemory } = options;
    this.transcoderSetting = options.transcoder ?? 'js';
    this.threads = new BundledPool({
      entry: fileURLToPath(new URL('./worker.ts', import.meta.url)),
      name: 'the worker pool',
      minThreads: workers,
      maxThreads: workers,
      concurrentTasksPerWorker: TASKS_PER_WORKER,
      maxHeapMb,
      onOutOfMemory,
      warmTask: this.transcoderSetting,
    });
  }

  /**
   * Starts the worker threads; resolves once each has loaded the code and its OTLP transcoder.
   * Fails when SLUICE_TRANSCODER=wasm and a thread cannot run the WebAssembly transcoder.
   */
  start(): Promise<void> {
    this.starting ??= this.startThreads();
    return this.starting;
  }

  private async startThreads(): Promise<void> {
    await this.threads.start();
    const statuses = this.threads.warmAnswers as TranscoderStatus[];
    // The threads load the same module the same way; one that could not says why.
    this.transcoder = statuses.find((status) => status.transcoder === 'js') ?? statuses[0] ?? { transcoder: 'js' };
    if (this.transcoderSetting === 'wasm' && this.transcoder.transcoder !== 'wasm') {
      await this.threads.shutdown();
      throw new Error(`SLUICE_TRANSCODER=wasm, and ${this.transcoder.problem}`);
    }
  }

  /** Stops the threads, once a start under way has finished (or failed). */
  async shutdown(): Promise<void> {
    await this.starting?.catch(() => {});
    this.starting = undefined;
    await this.threads.shutdown();
  }

  /** Ready while its threads run (piscina replaces a thread that died); figures for operators. */
  status(): ComponentStatus {
    const status = this.threads.status();
    return { ...status, figures: { ...status.figures, ...this.sent } };
  }

  /**
   * Decodes a request on a thread. Requests handed over in the same turn of the event loop go
   * to the threads together, at most one batch per thread (see post()).
   */
  run(task: PipelineTask): Promise<TaskResult> {
    if (!this.threads.piscina) return Promise.reject(new SluiceError('unavailable', 'pipeline is not running', { retryAfterSeconds: this.options.retryAfterSeconds }));
    if (task.kind === 'otlp') task.transcoder = this.transcoderSetting;
    return new Promise((resolve, reject) => {
      if (this.waiting.push({ task, resolve, reject }) === 1) setImmediate(() => this.post());
    });
  }

  /**
   * Sends the requests of this turn to the threads: as many batches as there are threads (fewer
   * when fewer requests came), each one message with its bodies and some spares transferred.
   * Every message to a thread costs the main thread a postMessage and, when the thread sleeps,
   * a wake (70–330 µs of CPU on the 2-vCPU machine the bench runs on: bench/HISTORY.md, "Worker
   * wake-ups"); one per batch instead of one per request. A batch waits for its slowest request,
   * a millisecond or two at saturation, when many requests arrive in a turn.
   */
  private post(): void {
    const waiting = this.waiting;
    this.waiting = [];
    const batches = Math.min(waiting.length, this.options.workers);
    const size = Math.ceil(waiting.length / batches);
    for (let from = 0; from < waiting.length; from += size) void this.runBatch(waiting.slice(from, from + size));
  }

  private async runBatch(batch: Waiting[]): Promise<void> {
    const tasks = batch.map(({ task }) => task);
    this.sent.requests += tasks.length;
    this.sent.messages++;
    // A set: a buffer listed twice cannot be transferred (two tasks of one body, say).
    const transfers = new Set<ArrayBuffer>();
    if (this.spares.length > 0) {
      tasks[0]!.spares = this.spares.splice(0, SPARES_PER_TASK);
      for (const spare of tasks[0]!.spares) transfers.add(spare);
    }
    // Transfer only a buffer the body owns whole; a view into a shared buffer is copied.
    for (const { body } of tasks) {
      if (body.byteOffset === 0 && body.byteLength === body.buffer.byteLength) transfers.add(body.buffer as ArrayBuffer);
    }
    const transferList = [...transfers];
    let results: TaskResult[];
    try {
      results = tasks.length === 1
        ? [await this.threads.run<TaskResult>(tasks[0], { transferList })]
        : await this.threads.run<TaskResult[]>({ kind: 'batch', tasks } satisfies BatchTask, { transferList });
    } catch (err) {
      for (const { reject } of batch) reject(err);
      return;
    }
    for (const [i, { resolve }] of batch.entries()) {
      const result = results[i]!;
      if (result.fallback) this.options.onTranscoderFallback?.(result.fallback);
      resolve(result);
    }
  }

  /**
   * Takes back the buffers of rows nothing reads any more (their publish resolved), to be
   * written into again by a worker. Call it at most once per result.
   */
  recycle(chunks: ReadonlyArray<{ data: Uint8Array }>): void {
    for (const { data } of chunks) {
      const buffer = data.buffer;
      if (this.spares.length >= SPARES_PER_WORKER * this.options.workers) return;
      // A detached buffer has no bytes; a shared one cannot be transferred.
      if (!(buffer instanceof ArrayBuffer) || data.byteOffset !== 0 || buffer.byteLength < MIN_SPARE_BYTES || buffer.byteLength > MAX_SPARE_BYTES) continue;
      if (!this.spares.includes(buffer)) this.spares.push(buffer);
    }
  }
}
