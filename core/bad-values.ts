/**
 * Stored values a reader had to skip (not JSON, or not the shape it needs). One bad value in a
 * shared bucket reaches every process at once, so it must never throw: it is counted for
 * readiness and logged once per key with where it is, never with the value itself (it may hold
 * a secret, or be large; V8's JSON.parse messages quote the text, so those are not logged either).
 */
import type { Logger } from './log.ts';

/** Keys remembered as already logged; past this, a bad key may be logged again. */
const MAX_REMEMBERED = 10_000;

export class BadValues {
  /** Bad values seen (a key seen bad twice counts twice). */
  count = 0;
  lastKey: string | undefined;
  private readonly logged = new Set<string>();

  /** @param where what names the place in logs, e.g. `{ bucket: 'api_keys' }` */
  constructor(private readonly log: Logger, private readonly where: Record<string, string>) {}

  /**
   * Counts a bad value of `key`. `reason` (a fixed phrase such as 'not JSON') is logged the first
   * time the key is bad; without one, whoever found it logged it already.
   */
  note(key: string, reason?: string): void {
    this.count++;
    this.lastKey = key;
    if (reason === undefined || this.logged.has(key)) return;
    if (this.logged.size >= MAX_REMEMBERED) this.logged.clear();
    this.logged.add(key);
    this.log.warn({ ...this.where, recordKey: key, reason }, 'skipped a stored value that cannot be read');
  }

  /** The key holds a good value again: the next bad one is worth a log line. */
  clear(key: string): void {
    this.logged.delete(key);
  }
}
