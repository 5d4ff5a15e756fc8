/**
 * A NATS KV watch that stays open. nats.js ends a watch's iterator when its consumer cannot be
 * re-created or its subscription fails, and a plain `for await` over it then stops every later
 * change (a revoked key) from reaching this process, without a trace. KvWatch follows a bucket
 * by revision instead: a watch that ends or fails is re-opened with backoff (the Supervisor's),
 * from the revision after the last one it delivered, so puts and deletes made meanwhile still
 * arrive, in order. Used by the NATS KV state store and the storage consumers' manifest index.
 *
 * A watch can also go quiet without ending: after every nats-server was killed at once, nats.js
 * re-created the watch's consumer and it delivered nothing while heartbeats still came (a key
 * added then was never seen by the gateway). So an open watch is checked against the last
 * revision of what it follows (the bucket's, or its keys') every `auditMs`: still short of the
 * revision there was at the previous check, it is re-opened from the last revision it delivered.
 * A bucket whose revisions went back below the watch's (created again, or reset by a crash) is
 * followed again from its start: its new changes would otherwise wait until its revisions caught up.
 */
import type { Bucket, KV, KvEntry, KvWatchEntry } from '@nats-io/kv';
import type { QueuedIterator } from '@nats-io/nats-core';
import type { Logger } from './log.ts';
import type { ComponentStatus } from './readiness.ts';
import { Supervisor, type LoopContext } from './supervisor.ts';

export interface KvWatchOptions {
  /** Names the watch in logs and in its status, e.g. `state watch api_keys`. */
  name: string;
  log: Logger;
  /** Only keys matching this filter (`*` a token, `>` the rest), e.g. one stream's batch manifests. Default: every key. */
  keys?: string;
  /** The watch ended or failed (`reason`) and will be re-opened after a backoff. */
  onInterrupted?: (reason: string) => void;
  /** The watch is open again; the changes it missed follow. */
  onResumed?: () => void;
  /** First pause before a re-open, doubling on each failure. Default 250 ms. */
  minBackoffMs?: number;
  /** Longest pause between re-opens. Default 30 s. */
  maxBackoffMs?: number;
  /** How often an open watch is checked against the last revision of what it follows. Default 15 s. */
  auditMs?: number;
}

export class KvWatch {
  private readonly supervisor: Supervisor;
  /** The last revision delivered; at first the bucket's last one, 0 to replay the whole bucket. */
  private revision: number | undefined;
  /** Set when the watch failed, until it is open again. */
  private reopening = false;
  private lastFailure = '';
  private handlerErrors = 0;
  private markReady: () => void = () => {};
  private readonly ready = new Promise<void>((resolve) => (this.markReady = resolve));

  /**
   * @param bucket the KV bucket (a function, so a bucket that cannot be opened yet is retried)
   * @param onEntry called for every put, delete and purge; what it throws is counted and logged
   */
  constructor(
    private readonly bucket: () => KV | Promise<KV>,
    private readonly onEntry: (entry: KvEntry) => void,
    private readonly options: KvWatchOptions,
  ) {
    this.supervisor = new Supervisor({
      log: options.log,
      minBackoffMs: options.minBackoffMs,
      maxBackoffMs: options.maxBackoffMs,
      onRestart: () => {
        this.reopening = true;
        options.onInterrupted?.(this.lastFailure);
      },
    });
  }

  /**
   * Starts following the bucket. Resolves (never rejects) once the first attempt to open the
   * watch is over: when it opened, every later change is delivered; when it failed, the watch
   * keeps trying, and delivers from where it would have started (the latest value of each key
   * changed meanwhile, deletes included).
   */
  start(): Promise<void> {
    this.supervisor.run(this.options.name, (context) => this.follow(context));
    return this.ready;
  }

  async stop(): Promise<void> {
    this.markReady();
    await this.supervisor.stop();
  }

  /** Not ok while (re-)opening; figures: restarts, and handler failures when there were any. */
  status(): ComponentStatus {
    const status = this.supervisor.status(this.options.name);
    const figures = { ...status.figures, ...(this.handlerErrors > 0 ? { handlerErrors: this.handlerErrors } : {}) };
    // Backing off or opening again: one message for both, with why.
    if (this.reopening && status.detail !== 'stopped') return { ok: false, detail: `watch re-opening after: ${this.lastFailure}`, figures };
    return { ...status, figures };
  }

  private async follow({ signal, report }: LoopContext): Promise<void> {
    report({ ok: false, detail: 'opening the watch' });
    let kv: KV;
    let updates: QueuedIterator<KvWatchEntry>;
    try {
      kv = await this.bucket();
      this.revision ??= (await kv.status()).streamInfo.state.last_seq;
      updates = await kv.watch({ resumeFromRevision: this.revision + 1, ...(this.options.keys ? { key: this.options.keys } : {}) });
      // Ready once the watch is open, not merely once its revision is fixed: a bucket keeps only
      // the last value of a key, so a put followed by a delete before the watch opened would
      // reach it as the delete alone.
      this.markReady();
    } catch (err) {
      // Not even the starting revision is known: the next open replays the bucket, so nothing is missed.
      this.revision ??= 0;
      this.markReady();
      throw this.failed(err);
    }
    const stopUpdates = () => updates.stop();
    signal.addEventListener('abort', stopUpdates, { once: true });
    if (signal.aborted) stopUpdates();
    let quiet: string | undefined;
    const audit = this.audit(kv, (reason) => {
      quiet = reason;
      updates.stop();
    });
    try {
      report({ ok: true });
      const resumed = this.reopening;
      this.reopening = false;
      if (resumed) this.options.onResumed?.();
      for await (const entry of updates) {
        this.revision = entry.revision;
        this.deliver(entry);
      }
    } catch (err) {
      throw this.failed(err);
    } finally {
      audit.stop();
      signal.removeEventListener('abort', stopUpdates);
      updates.stop();
    }
    if (!signal.aborted) throw this.failed(new Error(quiet ?? 'the watch ended by itself'));
  }

  /**
   * Checks every auditMs that the watch delivered what the bucket held one check earlier, and
   * that the bucket did not go back below what it delivered (a bucket deleted and created again,
   * or brought back at an earlier revision after a SIGKILL: its new changes have revisions the
   * watch would wait past); calls `quiet` (once) when either holds, the second at two checks in
   * a row, and then the watch starts over from the bucket's start. A check that cannot read the
   * bucket is skipped.
   */
  private audit(kv: KV, quiet: (reason: string) => void): { stop(): void } {
    const everyMs = this.options.auditMs ?? 15_000;
    let owed: number | undefined; // the bucket's last revision at the previous check, when ahead of the watch
    let wentBack = false; // the bucket's last revision was below the watch's at the previous check
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    const check = async () => {
      const last = await this.lastRevision(kv).catch(() => undefined);
      if (stopped) return;
      const delivered = this.revision ?? 0;
      if (owed !== undefined && delivered < owed) {
        return quiet(`the watch went quiet: still at revision ${delivered} ${everyMs / 1000} s after the bucket reached ${owed}`);
      }
      // 0: nothing there (expired, say), no sign of where the bucket is.
      const below = last !== undefined && last > 0 && last < delivered;
      if (below && wentBack) {
        this.revision = 0; // every key's value again, from the start
        return quiet(`the bucket went back to revision ${last}, below the watch's ${delivered}: following it from its start`);
      }
      wentBack = below;
      if (last !== undefined) owed = last > delivered ? last : undefined;
      timer = setTimeout(check, everyMs).unref();
    };
    timer = setTimeout(check, everyMs).unref();
    return {
      stop() {
        stopped = true;
        clearTimeout(timer);
      },
    };
  }

  /** The revision of the bucket's last change, or of its last change to the watched keys (0 if none). */
  private async lastRevision(kv: KV): Promise<number> {
    const keys = this.options.keys;
    if (keys === undefined) return (await kv.status()).streamInfo.state.last_seq;
    // Bucket is what Kvm hands out; its manager reads the last message on the keys' subjects.
    const bucket = kv as Bucket;
    return (await bucket.jsm.streams.getMessage(bucket.stream, { last_by_subj: bucket.fullKeyName(keys) }))?.seq ?? 0;
  }

  private deliver(entry: KvEntry): void {
    try {
      this.onEntry(entry);
    } catch (err) {
      this.handlerErrors++;
      this.options.log.error({ watch: this.options.name, recordKey: entry.key, err }, 'a watch handler failed; the watch goes on');
    }
  }

  private failed(err: unknown): unknown {
    this.lastFailure = err instanceof Error ? err.message : String(err);
    return err;
  }
}

/** The JSON value of a KV put, or undefined when its bytes are not JSON (never throws). */
export function readJson(entry: KvEntry): { value: unknown } | undefined {
  try {
    return { value: entry.json<unknown>() };
  } catch {
    return undefined;
  }
}
