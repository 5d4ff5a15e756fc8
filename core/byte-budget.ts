/**
 * ByteBudget: one per process, it bounds the request bytes held in memory end to end. A front
 * end reserves after admission (rate limit, key check) and before it reads the body; the
 * reservation grows with a body of unannounced length, is resized to the rows once the worker
 * pool built them, and is released when the bus settled the publish (commit or PubAck) or the
 * request failed anywhere. A reservation that cannot be had is refused with 503 + Retry-After:
 * a full budget refuses new work instead of growing the heap. So is one that would grow while
 * the process is at its memory budget (`memory`, core/memory-guard.ts), whatever holds it.
 */
import { SluiceError } from './errors.ts';
import type { ComponentStatus } from './readiness.ts';

export interface ByteBudgetOptions {
  limitBytes: number;
  retryAfterSeconds: number;
  /** Called on every refusal (for the metrics counter). */
  onRefusal?: () => void;
  /** The process's memory budget: while it refuses, no reservation is made or grows (its refusals are its own to count). */
  memory?: { refusal(): SluiceError | undefined };
  /** Clock for "refused recently" in status(); tests inject one. */
  now?: () => number;
}

export interface ByteBudgetFigures {
  inUseBytes: number;
  limitBytes: number;
  refusals: number;
}

/** How long status() keeps saying "full" after a refusal. */
const FULL_REPORT_MS = 10_000;

export class ByteBudget {
  private inUse = 0;
  private refused = 0;
  private lastRefusalAt = -Infinity;
  private readonly now: () => number;
  /** What reservations may do to this budget (the budget's own methods stay private). */
  private readonly account: Account = { take: (bytes) => this.take(bytes), give: (bytes) => this.give(bytes) };

  constructor(private readonly options: ByteBudgetOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * Takes `bytes` (0 for a body of unknown length: it grows as it arrives). Throws
   * unavailable (503) when they do not fit now, payload_too_large when they never could.
   */
  reserve(bytes: number): Reservation {
    this.take(bytes);
    return new Reservation(this.account, bytes);
  }

  get figures(): ByteBudgetFigures {
    return { inUseBytes: this.inUse, limitBytes: this.options.limitBytes, refusals: this.refused };
  }

  /** Always ok (refusing is its job, not a fault); says "full" while it is refusing. */
  status(): ComponentStatus {
    const figures = { ...this.figures };
    if (this.now() - this.lastRefusalAt < FULL_REPORT_MS) {
      return { ok: true, detail: 'full: new requests are refused with 503 until in-flight requests are committed', figures };
    }
    return { ok: true, figures };
  }

  private take(bytes: number): void {
    if (bytes > this.options.limitBytes) {
      throw new SluiceError('payload_too_large', `the request needs ${bytes} bytes in memory, more than the in-flight limit of ${this.options.limitBytes} bytes`);
    }
    const overMemory = this.options.memory?.refusal();
    if (overMemory) throw overMemory;
    // Even an empty reservation is refused when nothing is left: a full budget takes no new work.
    if (this.inUse + Math.max(bytes, 1) > this.options.limitBytes) {
      this.refused++;
      this.lastRefusalAt = this.now();
      this.options.onRefusal?.();
      throw new SluiceError('unavailable', 'the gateway is at its in-flight memory limit: too many requests wait for the bus', {
        retryAfterSeconds: this.options.retryAfterSeconds,
      });
    }
    this.inUse += bytes;
  }

  private give(bytes: number): void {
    this.inUse -= bytes;
  }
}

interface Account {
  /** Throws when the bytes cannot be had. */
  take(bytes: number): void;
  give(bytes: number): void;
}

/** Bytes held for one request; release() returns them once (later calls do nothing). */
export class Reservation {
  private held: number;
  private released = false;

  /** Made by ByteBudget.reserve() and split(). */
  constructor(private readonly budget: Account, bytes: number) {
    this.held = bytes;
  }

  get bytes(): number {
    return this.held;
  }

  /**
   * Holds `bytes` instead: shrinking always succeeds; growing throws like reserve() and leaves
   * the reservation as it was.
   */
  resize(bytes: number): void {
    if (this.released) throw new Error('resize of a released reservation');
    if (bytes > this.held) this.budget.take(bytes - this.held);
    else this.budget.give(this.held - bytes);
    this.held = bytes;
  }

  /**
   * Moves `bytes` of this reservation into a new one, for a part that outlives the request
   * (rows a bus still holds after answering). The total stays the same: nothing is refused.
   */
  split(bytes: number): Reservation {
    if (this.released) throw new Error('split of a released reservation');
    const moved = Math.min(bytes, this.held);
    this.held -= moved;
    return new Reservation(this.budget, moved);
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this.held);
    this.held = 0;
  }
}
