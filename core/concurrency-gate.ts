/**
 * At most `running` tasks at once, the rest waiting in order (at most `waiting` of them; more
 * are refused with the owner's error). A chDB statement holds a thread of libuv's pool until it
 * ends, and that pool also runs the engine's inserts and the process's disk writes (the local
 * log's fdatasync): readers (the query endpoint, the console) must not take all of it.
 */
export class ConcurrencyGate {
  private active = 0;
  private readonly queue: Array<() => void> = [];

  /** `refuse`: the error for a task past the queue. */
  constructor(private readonly running: number, private readonly waiting: number, private readonly refuse: () => Error) {}

  /** No task runs or waits. */
  get idle(): boolean {
    return this.active === 0;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.running) {
      if (this.queue.length >= this.waiting) throw this.refuse();
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
