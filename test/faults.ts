/**
 * Tools of fault tests: a logger the test reads, a net for errors that escape to the process,
 * and a handle on the feeds of NATS KV watches, to end them the way nats.js does.
 */
import { Bucket, type KvWatchEntry, type KvWatchOptions } from '@nats-io/kv';
import type { QueuedIterator } from '@nats-io/nats-core';
import { vi } from 'vitest';
import { createLogger } from '../core/log.ts';

/** A logger whose JSON lines the test reads. */
export function capturedLog() {
  const lines: string[] = [];
  const log = createLogger('info', { write: (line: string) => void lines.push(line) });
  const entries = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  return { log, lines, entries };
}

/**
 * Collects unhandled rejections and uncaught exceptions while it is installed: what would take a
 * gateway down. (vitest reports them too; this lets a test assert there were none, at its point.)
 */
export function escapedErrors() {
  const escaped: unknown[] = [];
  const collect = (err: unknown) => void escaped.push(err);
  process.on('unhandledRejection', collect);
  process.on('uncaughtException', collect);
  return {
    escaped,
    dispose() {
      process.off('unhandledRejection', collect);
      process.off('uncaughtException', collect);
    },
  };
}

/**
 * The feeds (iterators) of the KV watches opened on the bucket named `bucket` from now on, so a
 * test can stop one (as nats.js does when it gives up on the watch's consumer) and hold the next
 * open back. Undo with vi.restoreAllMocks().
 */
export function watchFeeds(bucket: string) {
  const feeds: Array<QueuedIterator<KvWatchEntry>> = [];
  let hold: Promise<void> | undefined;
  let failures: Error[] = [];
  let mute = false;
  const watch = Bucket.prototype.watch;
  vi.spyOn(Bucket.prototype, 'watch').mockImplementation(async function (this: Bucket, options?: KvWatchOptions) {
    if (this.bucket !== bucket) return watch.call(this, options);
    const failure = failures.shift();
    if (failure) throw failure;
    if (hold) await hold;
    // Open and heartbeating, but on a key nothing is written to.
    const feed = await watch.call(this, mute ? { ...options, key: 'a-key-no-one-writes' } : options);
    mute = false;
    feeds.push(feed);
    return feed;
  });
  return {
    latest(): QueuedIterator<KvWatchEntry> {
      const feed = feeds.at(-1);
      if (!feed) throw new Error(`no watch of ${bucket} was opened`);
      return feed;
    },
    /** The next opens of a watch of the bucket fail at once with these errors, in order. */
    failNextOpens(...errors: Error[]) {
      failures = errors;
    },
    /** The next watch of the bucket opens but delivers nothing and never ends (as a consumer re-created after every server restarted did). */
    muteNextOpen() {
      mute = true;
    },
    /** Watches of the bucket opened from now on wait until release() is called. */
    holdNextOpen() {
      let release = () => {};
      hold = new Promise<void>((resolve) => (release = resolve));
      return {
        release() {
          hold = undefined;
          release();
        },
      };
    },
  };
}
