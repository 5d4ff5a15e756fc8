/**
 * Supervisor: runs the long-lived loops of a process (storage consumers, watches) so that none
 * dies silently. A loop that throws — or returns while nobody asked it to stop — is logged,
 * counted and started again after an exponential backoff; its state is visible in readiness.
 */
import type { Logger } from './log.ts';
import type { ComponentStatus } from './readiness.ts';

/** What a supervised loop gets: a signal that aborts on stop(), and a way to say how it is. */
export interface LoopContext {
  signal: AbortSignal;
  /** Overrides the loop's status while it runs (e.g. "connected, catching up"); cleared on restart. */
  report(status: ComponentStatus): void;
}

export type SupervisedLoop = (context: LoopContext) => Promise<void>;

export interface SupervisorOptions {
  log: Logger;
  /** Called on each restart (the composition root counts them in a metric). */
  onRestart?: (name: string) => void;
  /** First pause before a restart. Default 250 ms. */
  minBackoffMs?: number;
  /** Longest pause between restarts; a loop that ran this long before failing starts over at the minimum. Default 30 s. */
  maxBackoffMs?: number;
}

interface LoopState {
  /** Aborts this loop alone (end()); stop() aborts every loop through it too. */
  controller: AbortController;
  restarts: number;
  backingOff: boolean;
  lastError: string | undefined;
  reported: ComponentStatus | undefined;
  done: Promise<void>;
}

export class Supervisor {
  private readonly loops = new Map<string, LoopState>();
  private readonly stopping = new AbortController();
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;

  constructor(private readonly options: SupervisorOptions) {
    this.minBackoffMs = options.minBackoffMs ?? 250;
    this.maxBackoffMs = options.maxBackoffMs ?? 30_000;
  }

  /** Starts `loop` under supervision; `name` labels its logs, metric and readiness entry. */
  run(name: string, loop: SupervisedLoop): void {
    if (this.loops.has(name)) throw new Error(`a loop named ${name} is already supervised`);
    const controller = new AbortController();
    if (this.stopping.signal.aborted) controller.abort();
    else this.stopping.signal.addEventListener('abort', () => controller.abort(), { once: true });
    const state: LoopState = { controller, restarts: 0, backingOff: false, lastError: undefined, reported: undefined, done: Promise.resolve() };
    this.loops.set(name, state);
    state.done = this.keepRunning(name, loop, state);
  }

  /** Names of the loops, for readiness registration. */
  names(): string[] {
    return [...this.loops.keys()];
  }

  status(name: string): ComponentStatus {
    const state = this.loops.get(name);
    if (!state) return { ok: false, detail: 'not started' };
    const figures = { restarts: state.restarts };
    if (this.stopping.signal.aborted) return { ok: false, detail: 'stopped', figures };
    if (state.backingOff) return { ok: false, detail: `restarting after: ${state.lastError}`, figures };
    if (state.reported) return { ...state.reported, figures: { ...figures, ...state.reported.figures } };
    return { ok: true, ...(state.lastError ? { detail: `running; last failure: ${state.lastError}` } : {}), figures };
  }

  /** Stops one loop, waits until it has returned, and forgets it (its name may be run again). */
  async end(name: string): Promise<void> {
    const state = this.loops.get(name);
    if (!state) return;
    state.controller.abort();
    await state.done;
    if (this.loops.get(name) === state) this.loops.delete(name);
  }

  /** Aborts every loop and waits until each has returned. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await Promise.all([...this.loops.values()].map((state) => state.done));
  }

  private async keepRunning(name: string, loop: SupervisedLoop, state: LoopState): Promise<void> {
    const { signal } = state.controller;
    let backoffMs = 0;
    while (!signal.aborted) {
      const startedAt = Date.now();
      state.backingOff = false;
      try {
        await loop({ signal, report: (status) => (state.reported = status) });
        if (signal.aborted) break;
        throw new Error('the loop ended by itself');
      } catch (err) {
        if (signal.aborted) break;
        state.restarts++;
        state.reported = undefined;
        state.backingOff = true;
        state.lastError = err instanceof Error ? err.message : String(err);
        const ranLong = Date.now() - startedAt >= this.maxBackoffMs;
        backoffMs = ranLong ? this.minBackoffMs : Math.min(this.maxBackoffMs, Math.max(this.minBackoffMs, backoffMs * 2));
        this.options.log.error({ loop: name, err, restarts: state.restarts, restartInMs: backoffMs }, 'loop failed; restarting it');
        this.options.onRestart?.(name);
        await sleep(backoffMs, signal);
      }
    }
    state.backingOff = false;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}
