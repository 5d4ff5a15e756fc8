/**
 * StateMirror: one bucket of the state store held in memory and kept fresh by the store's watch,
 * so hot paths (API key checks, agent configs, relay settings) read a Map, never the store.
 * Every in-memory copy of a bucket is one of these, with one way of failing:
 * - a value that is not JSON (the driver's finding) or not the shape the owner's validator
 *   accepts is counted and skipped: its key is absent from the mirror, as it is for readers of
 *   the store, so an unreadable record (a key revocation) never leaves an older one in force;
 * - a change listener that throws (an index with a bug, data it did not expect) is caught and
 *   counted; the mirror and the other listeners go on;
 * - a watch the driver is re-opening makes the mirror not ok until it is open again.
 * status() shows all of it for readiness.
 */
import { BadValues } from '../core/bad-values.ts';
import { fallbackLogger, type Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import type { StateEvent, StateStore } from './store.ts';

export interface StateMirrorOptions<T> {
  /** Whether a stored value has the shape the mirror's readers rely on (see state/shape.ts). */
  validate: (value: unknown, key: string) => value is T;
  /** Where skipped values and failed listeners are logged. Default: warnings to stderr. */
  log?: Logger;
}

type Listener<T> = (key: string, value: T | undefined) => void;

export class StateMirror<T> {
  private readonly items = new Map<string, T>();
  private readonly listeners: Array<Listener<T>> = [];
  private readonly validate: (value: unknown, key: string) => value is T;
  private readonly log: Logger;
  private readonly bad: BadValues;
  private unwatch: (() => void) | undefined;
  private phase: 'new' | 'starting' | 'running' | 'stopped' = 'new';
  /** While the first list is read: keys the watch changed meanwhile (the list's values are older). */
  private changedWhileListing: Set<string> | undefined;
  /** Local writes in flight per key, and whether the watch brought a change of that key meanwhile. */
  private readonly writing = new Map<string, { writers: number; overtaken: boolean }>();
  private interruption: string | undefined;
  private restarts = 0;
  private listenerErrors = 0;
  private lastListenerError = '';

  constructor(private readonly store: StateStore, readonly bucket: string, options: StateMirrorOptions<T>) {
    this.validate = options.validate;
    this.log = options.log ?? fallbackLogger();
    this.bad = new BadValues(this.log, { bucket });
  }

  /** Loads the bucket and follows it. A bad value already stored does not stop it. */
  async start(): Promise<void> {
    this.phase = 'starting';
    // Watch first, then list, so no change between the two is missed.
    this.changedWhileListing = new Set();
    this.unwatch = this.store.watch<unknown>(this.bucket, ({ key, value }) => this.fromWatch(key, value), (event) => this.onWatchEvent(event));
    try {
      const listed = await this.store.list<unknown>(this.bucket, (event) => {
        if (event.type === 'bad_value') this.bad.note(event.key);
      });
      for (const [key, value] of listed) if (!this.changedWhileListing.has(key)) this.receive(key, value);
    } catch (err) {
      this.stop();
      throw err;
    } finally {
      this.changedWhileListing = undefined;
    }
    if (this.phase === 'starting') this.phase = 'running';
  }

  stop(): void {
    this.phase = 'stopped';
    this.unwatch?.();
    this.unwatch = undefined;
  }

  /** Calls fn on every change of the mirror (value undefined when a key left it), for indexes. */
  onChange(fn: Listener<T>): void {
    this.listeners.push(fn);
  }

  get(key: string): T | undefined {
    return this.items.get(key);
  }

  get size(): number {
    return this.items.size;
  }

  values(): T[] {
    return [...this.items.values()];
  }

  find(predicate: (item: T) => boolean): T | undefined {
    for (const item of this.items.values()) if (predicate(item)) return item;
    return undefined;
  }

  /** Writes through to the store; this process sees the value at once, the others by their watch. */
  set(key: string, value: T): Promise<void> {
    return this.writeThrough(key, value, () => this.store.put(this.bucket, key, value));
  }

  delete(key: string): Promise<void> {
    return this.writeThrough(key, undefined, () => this.store.delete(this.bucket, key));
  }

  /**
   * Read-modify-write of one record with compare-and-set: `change` gets the stored value (not
   * this copy, which may lag) and returns the next one; if another writer got in between, it
   * runs again on theirs, so no change is lost. What `change` throws ends it (nothing written).
   */
  async modify(key: string, change: (current: T | undefined) => T): Promise<T> {
    for (;;) {
      const stored = await this.store.getVersioned<unknown>(this.bucket, key);
      const current = stored && this.validate(stored.value, key) ? stored.value : undefined;
      const next = change(current);
      let written = false;
      await this.writeThrough(key, next, async () => {
        const revision = stored
          ? await this.store.update(this.bucket, key, next, stored.revision)
          : await this.store.create(this.bucket, key, next);
        written = revision !== undefined;
        return written;
      });
      if (written) return next;
    }
  }

  /** ok while the watch is open; figures: entries, values skipped, watch re-opens, listener failures. */
  status(): ComponentStatus {
    const figures = { entries: this.items.size, badValues: this.bad.count, restarts: this.restarts, listenerErrors: this.listenerErrors };
    if (this.phase !== 'running') return { ok: false, detail: this.phase === 'stopped' ? 'stopped' : 'starting', figures };
    if (this.interruption !== undefined) return { ok: false, detail: `watch re-opening after: ${this.interruption}`, figures };
    // Bad data keeps the mirror ok: every gateway sees the same value, and none should leave the pool over it.
    const warnings: string[] = [];
    if (this.bad.count > 0) warnings.push(`${this.bad.count} unreadable values skipped (keys in the log)`);
    if (this.listenerErrors > 0) warnings.push(`${this.listenerErrors} change listener failures, the last: ${this.lastListenerError}`);
    return { ok: true, ...(warnings.length > 0 ? { detail: warnings.join('; ') } : {}), figures };
  }

  /** Runs `write`; unless it reports that it wrote nothing (false), this process sees `value` at once. */
  private async writeThrough(key: string, value: T | undefined, write: () => Promise<boolean | void>): Promise<void> {
    const pending = this.writing.get(key) ?? { writers: 0, overtaken: false };
    pending.writers++;
    this.writing.set(key, pending);
    try {
      const wrote = await write();
      // Unless the watch already brought a change of this key (this one, or a newer one made elsewhere).
      if (wrote !== false && !pending.overtaken) this.apply(key, value);
    } finally {
      if (--pending.writers === 0) this.writing.delete(key);
    }
  }

  private fromWatch(key: string, value: unknown): void {
    this.changedWhileListing?.add(key);
    const pending = this.writing.get(key);
    if (pending) pending.overtaken = true;
    this.receive(key, value);
  }

  private onWatchEvent(event: StateEvent): void {
    if (event.type === 'bad_value') {
      this.bad.note(event.key);
      this.fromWatch(event.key, undefined);
    } else if (event.type === 'interrupted') {
      this.restarts++;
      this.interruption = event.reason;
    } else {
      this.interruption = undefined;
    }
  }

  /** A value from the store: applied when it has the right shape; otherwise its key leaves the mirror. */
  private receive(key: string, value: unknown): void {
    if (value === undefined) return this.apply(key, undefined);
    let valid = false;
    try {
      valid = this.validate(value, key);
    } catch {
      // A validator that throws found a value it did not expect: that is a bad value too.
    }
    if (valid) this.bad.clear(key);
    else this.bad.note(key, 'wrong shape');
    this.apply(key, valid ? (value as T) : undefined);
  }

  private apply(key: string, value: T | undefined): void {
    if (value === undefined) {
      if (!this.items.delete(key)) return;
    } else {
      this.items.set(key, value);
    }
    for (const listener of this.listeners) {
      try {
        listener(key, value);
      } catch (err) {
        this.listenerErrors++;
        this.lastListenerError = err instanceof Error ? err.message : String(err);
        this.log.error({ bucket: this.bucket, recordKey: key, err }, 'a state change listener failed; the mirror goes on');
      }
    }
  }
}
