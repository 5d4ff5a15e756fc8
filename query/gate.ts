/**
 * At most `running` queries at once, the rest waiting in order (at most `waiting` of them; more
 * are refused). A chDB query holds a thread of libuv's pool until it ends, and that pool also
 * runs the engine's inserts and the process's disk writes: a dashboard firing twenty panels
 * must not take all of it.
 */
import { ClickHouseException } from './errors.ts';

export class QueryGate {
  private active = 0;
  private readonly queue: Array<() => void> = [];

  constructor(private readonly running: number, private readonly waiting = 100) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.running) {
      if (this.queue.length >= this.waiting) {
        throw ClickHouseException.of('TOO_MANY_SIMULTANEOUS_QUERIES', `Too many simultaneous queries: ${this.running} running and ${this.waiting} waiting`, { status: 503, retryAfterSeconds: 1 });
      }
      await new Promise<void>((resolve) => this.queue.push(resolve));
    } else {
      this.active++;
    }
    try {
      return await task();
    } finally {
      // The slot passes to the next in line, or is given back.
      const next = this.queue.shift();
      if (next) next();
      else this.active--;
    }
  }
}
