/**
 * ChdbReadThreads: the embedded engine's read statements (the query endpoint's and the console's)
 * run on worker threads, so a large result never stalls the event loop. chDB turns a finished
 * statement's output into a JavaScript buffer on the thread that asked for it, in one piece: two
 * ~90 MiB answers at once held the main thread 1.6–2.1 s. On a read thread that cost is the
 * thread's; the buffer then moves to the main thread without a copy (bench/query-limits.ts,
 * docs/guides/querying.md). Each thread opens connections of its own on the engine dir (chDB
 * lets sessions on one data dir live on several threads of a process), with ChdbReader's rules:
 * one statement at a time per connection, a connection whose statement failed closed.
 *
 * The threads live as long as the process and are never stopped. A thread that loaded chDB and
 * ends (terminated, or by returning) takes the engine with it: every later statement of the
 * process hangs, even process.exit (tried with chDB 3.4: a worker that only imported chdb and
 * returned; the main thread's next `SELECT` never answered). So they are the process's, like
 * the engine: started by the first reader, shared by the ones after it (tests open several),
 * left running at exit, when the process takes them down with it. A reader's shutdown waits for
 * its statements and closes its connections on every thread, which is what frees the engine dir.
 */
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { SluiceError } from '../core/errors.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { bundleWorker } from '../core/worker-bundle.ts';
import type { StatementOptions, StatementOutput, StatementRunner } from './chdb-reader.ts';
import type { CloseTask, ReadAnswer, ReadTask } from './chdb-read-worker.ts';

/** How long a shutdown waits for every thread to have closed a reader's connections. */
const CLOSE_WAIT_MS = 5_000;

let processThreads: Promise<Piscina> | undefined;
let nextReader = 1;

/**
 * The process's read threads: `threads` of them, started by the first caller (later callers get
 * the same ones, whatever they ask). Never destroyed: see the module comment.
 */
function readThreads(threads: number): Promise<Piscina> {
  processThreads ??= (async () => {
    const bundle = await bundleWorker(fileURLToPath(new URL('./chdb-read-worker.ts', import.meta.url)));
    // Kept until the process exits, not removed once the threads loaded it: piscina starts a
    // thread that died again from it (the bundle is alone in a directory of its own).
    process.once('exit', () => rmSync(dirname(fileURLToPath(bundle.url)), { recursive: true, force: true }));
    const pool = new Piscina({
      filename: bundle.url,
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: Infinity,
      concurrentTasksPerWorker: 1,
      // An idle thread's event loop keeps running (piscina's default blocks it in Atomics.wait
      // between tasks), so a connection chDB closes once a statement has drained closes then.
      atomics: 'disabled',
      recordTiming: false,
    });
    await Promise.all(Array.from({ length: threads }, () => pool.run(null, { name: 'warm' })));
    // No thread is ever ended on purpose, so one that ended (a crash, its heap exhausted) took the
    // engine with it: every later statement would hang. That is fatal, and said at once: thrown
    // where nothing catches it, it reaches the process's uncaught-exception handler, which logs
    // it and exits (bin/exit-codes.ts; the engine, half gone, may end the exit with SIGSEGV) for
    // the supervisor to restart the process (storage/chdb-read-threads-lost.test.ts).
    pool.once('workerDestroy', () => process.nextTick(() => {
      throw new Error('a chDB read thread ended, which takes the embedded engine with it (every later statement would hang): the process must restart');
    }));
    return pool;
  })();
  processThreads.catch(() => (processThreads = undefined));
  return processThreads;
}

/** A StatementRunner on the embedded engine whose statements run on the process's read threads. */
export class ChdbReadThreads implements StatementRunner {
  /** This reader's connections on every thread are told apart from other readers' by it. */
  private readonly reader = nextReader++;
  private pool: Piscina | undefined;
  private readonly running = new Set<Promise<ReadAnswer>>();
  private stopped = false;

  /**
   * `engineDir`: chDB's directory in the data dir (chdbEngineDir). `threads`: statements that run
   * at once, the sum of the caps of the gates in front of it (query/gate.ts, core/read-gate.ts).
   * `engineArgs`: the engine's settings (storage/chdb-engine.ts).
   */
  constructor(private readonly engineDir: string, private readonly threads: number, private readonly engineArgs: readonly string[] = []) {}

  /** Starts the process's read threads (once per process); resolves once each has loaded the code. */
  async start(): Promise<void> {
    this.pool = await readThreads(this.threads);
  }

  async run(database: string, sql: string, options: StatementOptions): Promise<StatementOutput> {
    if (!this.pool || this.stopped) throw new SluiceError('unavailable', 'the chDB read threads are not running', { retryAfterSeconds: 5 });
    const task: ReadTask = { reader: this.reader, engineDir: this.engineDir, engineArgs: this.engineArgs, database, sql, options };
    const answer = this.pool.run(task) as Promise<ReadAnswer>;
    this.running.add(answer);
    try {
      const settled = await answer;
      if (!settled.ok) throw engineError(settled.error);
      return settled.output;
    } finally {
      this.running.delete(answer);
    }
  }

  /**
   * Refuses new statements and closes this reader's connections on every thread (the threads keep
   * running). As ChdbReader, it does not wait for statements under way (their requests had the
   * servers' grace; one may run to the query time limit): a thread running one closes the
   * connections once it ends, or the process exits first. With none under way (tests, and a
   * process that reopens the data dir) it resolves once every thread has closed them.
   */
  async shutdown(): Promise<void> {
    this.stopped = true;
    const pool = this.pool;
    if (!pool) return;
    const threads = pool.threads.length;
    const task: CloseTask = { reader: this.reader, arrived: new Int32Array(new SharedArrayBuffer(4)), threads, waitMs: CLOSE_WAIT_MS };
    const closing = Promise.all(Array.from({ length: threads }, () => pool.run(task, { name: 'close' }) as Promise<boolean>));
    if (this.running.size > 0) {
      closing.catch(() => {});
      return;
    }
    if ((await closing).includes(false)) throw new Error(`the chDB read threads did not all close their connections within ${CLOSE_WAIT_MS} ms`);
  }

  /** Ready while its threads run; figures for operators. */
  status(): ComponentStatus {
    if (!this.pool || this.stopped) return { ok: false, detail: 'the chDB read threads are not running' };
    const figures = { threads: this.pool.threads.length, queued: this.pool.queueSize, utilization: Math.round(this.pool.utilization * 100) / 100 };
    if (figures.threads === 0) return { ok: false, detail: 'no chDB read thread is running', figures };
    return { ok: true, figures };
  }
}

/** The engine's error as the main thread sees it: chDB's name, code, clickhouseCode and text, as storage/errors.ts and query/errors.ts read them. */
function engineError(fields: Extract<ReadAnswer, { ok: false }>['error']): Error {
  const err = new Error(fields.message) as Error & { code?: unknown; clickhouseCode?: unknown };
  err.name = fields.name;
  if (fields.code !== undefined) err.code = fields.code;
  if (fields.clickhouseCode !== undefined) err.clickhouseCode = fields.clickhouseCode;
  return err;
}
