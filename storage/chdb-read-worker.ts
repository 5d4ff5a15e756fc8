// Entry point of a chDB read thread (chdb-read-threads.ts), bundled with what it imports into one
// JavaScript file when the threads start. Each thread runs one statement at a time, on read
// connections of its own kept by a ChdbReader per reader (one per engine dir the main thread's
// ChdbReadThreads opened), so the rules of chdb-reader.ts hold here unchanged.
import { setTimeout as sleep } from 'node:timers/promises';
import { threadId } from 'node:worker_threads';
import { drainPending } from 'chdb';
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { ChdbReader, type StatementOptions, type StatementOutput } from './chdb-reader.ts';

export interface ReadTask {
  /** The ChdbReadThreads instance the statement is for: its connections are its own. */
  reader: number;
  engineDir: string;
  /** The engine's settings, for a connection that would start it (storage/chdb-engine.ts). */
  engineArgs: readonly string[];
  database: string;
  sql: string;
  options: StatementOptions;
}

/** What a read thread answers: the output, or the engine's error as plain fields (they survive the thread boundary; an Error's own fields do not). */
export type ReadAnswer =
  | { ok: true; output: StatementOutput }
  | { ok: false; error: { name: string; message: string; code?: unknown; clickhouseCode?: unknown } };

export interface CloseTask {
  reader: number;
  /** Threads that have closed the reader's connections so far; the task ends once all have. */
  arrived: Int32Array;
  threads: number;
  /** How long a thread waits for the others (ms). */
  waitMs: number;
}

const readers = new Map<number, ChdbReader>();

/** Runs one statement; the result's bytes move to the main thread without a copy. */
export default async function read(task: ReadTask): Promise<unknown> {
  let reader = readers.get(task.reader);
  if (!reader) {
    reader = new ChdbReader(task.engineDir, task.engineArgs);
    readers.set(task.reader, reader);
  }
  try {
    const output = await reader.run(task.database, task.sql, task.options);
    // chDB's bytes are a buffer of their own (the whole of it, from offset 0): that buffer moves.
    // Anything else (a view into a shared pool) is copied first, as moving it would take the pool.
    const { bytes } = output;
    const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
    const answer: ReadAnswer = { ok: true, output: { ...output, bytes: own, threadId } };
    return move({
      get [transferableSymbol]() { return [own.buffer]; },
      get [valueSymbol]() { return answer; },
    } as never);
  } catch (err) {
    const fields = err as Error & { code?: unknown; clickhouseCode?: unknown };
    const error = err instanceof Error
      ? { name: err.name, message: err.message, code: fields.code, clickhouseCode: fields.clickhouseCode }
      : { name: 'Error', message: String(err) };
    return { ok: false, error } satisfies ReadAnswer;
  }
}

/**
 * Closes a reader's connections on this thread, then waits until every thread has: each thread
 * runs one task at a time, so `threads` close tasks held until all arrived are on `threads`
 * different threads. The teardowns chDB deferred behind running statements finish first.
 */
export async function close(task: CloseTask): Promise<boolean> {
  await readers.get(task.reader)?.shutdown();
  readers.delete(task.reader);
  await drainPending();
  Atomics.add(task.arrived, 0, 1);
  // Looked at every few ms (at shutdown only), so this thread's event loop is never blocked.
  const deadline = Date.now() + task.waitMs;
  while (Atomics.load(task.arrived, 0) < task.threads && Date.now() < deadline) await sleep(5);
  return Atomics.load(task.arrived, 0) >= task.threads;
}

/** Named task the pool runs to start each thread ahead of the first statement (chDB's addon is loaded with the module). */
export function warm(): boolean {
  return true;
}
