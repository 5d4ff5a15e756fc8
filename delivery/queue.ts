/**
 * The delivery queue holds the work: jobs waiting for their next attempt. Drivers: a durable
 * local queue on the embedded write-ahead log (embedded) and JetStream streams consumed by any
 * number of `sluice deliver` processes (cluster). Both have the same semantics:
 *
 * - enqueue() is all or nothing: when it resolves every job is durable (fdatasync'ed, or
 *   acknowledged by JetStream); when it throws none of them will be attempted. A series already
 *   queued is not queued twice. A full queue refuses (503 + Retry-After), never drops.
 * - a job is handed to one handler at a time, with its attempt number in the series (1-based);
 *   an attempt that never settles (the process died) is handed out again, with the next number,
 *   so a crash mid-attempt retries the job and never loses it;
 * - the handler's settlement ends the job (`done`: delivered or dead, the worker recorded which)
 *   or schedules its next attempt (`retryInMs`); a job waiting for its time holds nothing that
 *   other jobs need;
 * - attempts at once are capped per process, per tenant and per destination (DeliveryShares), so
 *   a slow or broken destination delays only its own jobs.
 */
import type { ComponentStatus } from '../core/readiness.ts';
import type { DeliveryJob } from './job.ts';

export interface QueuedAttempt {
  job: DeliveryJob;
  /** 1 for the first attempt of the series; counts attempts cut short by a crash too. */
  attempt: number;
}

export type Settlement = { done: true } | { retryInMs: number };

export type AttemptHandler = (queued: QueuedAttempt) => Promise<Settlement>;

export interface DeliveryQueue {
  start(): Promise<void>;
  /** Stops handing out jobs and waits for the attempts in progress to settle. */
  shutdown(): Promise<void>;
  /** Durable when this resolves, all of the jobs or none; a series already queued is not queued twice. */
  enqueue(jobs: readonly DeliveryJob[]): Promise<void>;
  /** Hands due jobs to `handle`, at most `concurrency` at once (and the shares' caps). A handler that throws gets the job again later. */
  consume(handle: AttemptHandler, concurrency: number): void;
  /** Jobs waiting or being attempted (for /metrics). */
  depth(): Promise<number>;
  /** `delivery.queue`, and the consumer loop when consume() was called. */
  statuses(): Record<string, ComponentStatus>;
}

/** How long a handler that threw waits before the job is handed out again. */
export const HANDLER_FAILURE_RETRY_MS = 30_000;
