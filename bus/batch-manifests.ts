/**
 * The batch manifests of the storage consumers, indexed in memory. Every consumer keeps the
 * index fresh from a KV watch, so a message can be checked against every batch of the last
 * hour without a KV round trip: a message that comes back after it was stored — redelivered,
 * or reappearing because a nats-server killed with SIGKILL lost the acks it had not yet
 * written — is recognised and acked instead of being inserted again.
 * A message is recognised by its msgID (the gateway's Nats-Msg-Id, `<publisher>:<count>`, unique),
 * not by its sequence: a stream deleted and created again, or one nats-server 2.9 restarted at
 * sequence 0 after a SIGKILL (its WorkQueue streams can lose their last sequence,
 * nats-io/nats-server#6600), gives new messages the sequences of batches stored within the hour
 * (matched by sequence, they would be acked as stored and lost), and replicas that diverged can
 * bring a stored message back at another sequence (it would be stored twice). Only a message
 * without a msgID, or a manifest written before manifests named msgIDs, is matched by sequence.
 * The watch is kept open from the last revision it saw (core/kv-watch.ts); a manifest that
 * cannot be read is counted and left out (its batch may then be inserted again, never lost).
 */
import type { KV, KvEntry } from '@nats-io/kv';
import { BadValues } from '../core/bad-values.ts';
import { KvWatch, readJson } from '../core/kv-watch.ts';
import { fallbackLogger, type Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';

export interface Manifest {
  token: string;
  seqs: number[];
  /** Each message's msgID, in the order of `seqs` ('' for a message published without one). Absent in manifests written by earlier consumers: those match by sequence alone. */
  ids?: string[];
  state: 'pending' | 'committed';
}

interface Indexed {
  key: string;
  /** When this process learnt of it: entries leave the index when the bucket's TTL drops them. */
  at: number;
  stream: string;
  /** The ranges of RANGE sequences its messages fall in. */
  ranges: number[];
  /** The runs of msgIDs its messages fall in (see runOf). */
  runs: string[];
  manifest: Manifest;
}

/** A manifest's messages in one run of msgIDs: their places in its `ids`. */
interface InRun {
  entry: Indexed;
  at: number[];
}

/**
 * Manifests are found by the range of RANGE stream sequences a message falls in: a lookup reads
 * the few manifests of that range, not every batch of the last hour (there may be 100,000s).
 */
const RANGE = 1024;
/**
 * Manifests are found by msgID through runs of RUN consecutive counts of one publisher: a
 * lookup compares at most the few msgIDs of its run, however large the batches or the hour, and
 * the index keeps a number per message rather than a map entry.
 */
const RUN = 64;

/** The run of a msgID in a stream: `<stream> <publisher>:<count / RUN>`; the msgID itself when it has no count. */
function runOf(stream: string, msgID: string): string {
  const colon = msgID.lastIndexOf(':');
  const count = colon === -1 ? NaN : Number(msgID.slice(colon + 1));
  return Number.isSafeInteger(count) && count >= 0 ? `${stream} ${msgID.slice(0, colon)}:${Math.floor(count / RUN)}` : `${stream} ${msgID}`;
}

export interface ManifestIndexOptions {
  /** Names the index in logs and in its status (e.g. the table whose batches it holds). */
  name?: string;
  /** Where unreadable manifests and re-opened watches are logged. Default: warnings to stderr. */
  log?: Logger;
  /** Only the manifests of this stream's batches (keys `<stream>.<first seq>-<batch>`; before, `<stream>.<first seq>`). Default: every stream's. */
  stream?: string;
  /** First pause before a watch that ended is re-opened (it doubles up to 30 s). Default 250 ms. */
  watchMinBackoffMs?: number;
  /** How often the watch is checked against the last manifest written (core/kv-watch.ts). Default 15 s. */
  watchAuditMs?: number;
}

function isManifest(value: unknown): value is Manifest {
  const manifest = value as Partial<Manifest> | null;
  return (
    typeof manifest === 'object' && manifest !== null && typeof manifest.token === 'string' &&
    (manifest.state === 'pending' || manifest.state === 'committed') &&
    Array.isArray(manifest.seqs) && manifest.seqs.length > 0 && manifest.seqs.every(Number.isSafeInteger) &&
    (manifest.ids === undefined || (Array.isArray(manifest.ids) && manifest.ids.length === manifest.seqs.length && manifest.ids.every((id) => typeof id === 'string')))
  );
}

export class ManifestIndex {
  private readonly byKey = new Map<string, Indexed>();
  /** Per stream, per range of sequences: the manifests with messages in it. */
  private readonly byRange = new Map<string, Map<number, Indexed[]>>();
  /** Per run of msgIDs (runOf): the manifests with messages in it, and where. */
  private readonly byRun = new Map<string, InRun[]>();
  private readonly watch: KvWatch;
  private readonly bad: BadValues;
  /** While the first listing runs: keys the watch changed meanwhile (the listing's values are older). */
  private changedWhileListing: Set<string> | undefined;
  private readonly keys: string | undefined;

  /** @param maxAgeMs the bucket's TTL: KV drops expired manifests without telling watchers. */
  constructor(readonly kv: KV, private readonly maxAgeMs: number, options: ManifestIndexOptions = {}) {
    const log = options.log ?? fallbackLogger();
    const name = options.name ?? 'batch manifests';
    this.bad = new BadValues(log, { bucket: name });
    this.keys = options.stream === undefined ? undefined : `${options.stream}.*`;
    this.watch = new KvWatch(() => kv, (entry) => this.fromWatch(entry), { name: `watch of ${name}`, log, keys: this.keys, minBackoffMs: options.watchMinBackoffMs, auditMs: options.watchAuditMs });
  }

  /** Loads the manifests there are and follows every later change. */
  async start(): Promise<void> {
    this.changedWhileListing = new Set();
    await this.watch.start();
    try {
      for await (const key of await this.kv.keys(this.keys)) {
        const entry = await this.kv.get(key);
        if (entry?.operation === 'PUT' && !this.changedWhileListing.has(key)) this.receive(entry);
      }
    } catch (err) {
      this.stop();
      throw err;
    } finally {
      this.changedWhileListing = undefined;
    }
  }

  stop(): void {
    void this.watch.stop();
  }

  /** ok while the watch is open; figures: watch re-opens, unreadable manifests skipped. */
  status(): ComponentStatus {
    const status = this.watch.status();
    const figures = { ...status.figures, badValues: this.bad.count };
    if (!status.ok || this.bad.count === 0) return { ...status, figures };
    return { ...status, detail: `${this.bad.count} unreadable manifests skipped (keys in the log)`, figures };
  }

  private fromWatch(entry: KvEntry): void {
    this.changedWhileListing?.add(entry.key);
    if (entry.operation === 'PUT') this.receive(entry);
    else this.apply(entry.key, undefined);
  }

  /** A stored manifest: indexed when readable; otherwise counted, and its key left out. */
  private receive(entry: KvEntry): void {
    const value = readJson(entry)?.value;
    if (isManifest(value)) {
      this.bad.clear(entry.key);
      return this.apply(entry.key, value);
    }
    this.bad.note(entry.key, value === undefined ? 'not JSON' : 'not a manifest');
    this.apply(entry.key, undefined);
  }

  /** Records a manifest this process wrote (the watch would bring it a moment later). */
  apply(key: string, manifest: Manifest | undefined): void {
    this.remove(key);
    if (!manifest) return;
    const stream = key.slice(0, key.lastIndexOf('.'));
    const now = Date.now();
    const entry: Indexed = { key, stream, at: now, ranges: [...new Set(manifest.seqs.map((seq) => Math.floor(seq / RANGE)))], runs: [], manifest };
    this.byKey.set(key, entry); // inserted last, so the map stays in arrival order for pruning
    const runs = new Map<string, number[]>();
    manifest.ids?.forEach((id, at) => {
      if (id === '') return;
      const run = runOf(stream, id);
      const places = runs.get(run);
      if (places) places.push(at);
      else runs.set(run, [at]);
    });
    for (const [run, at] of runs) {
      entry.runs.push(run);
      const inRun = this.byRun.get(run);
      if (inRun) inRun.push({ entry, at });
      else this.byRun.set(run, [{ entry, at }]);
    }
    let ranges = this.byRange.get(stream);
    if (!ranges) this.byRange.set(stream, (ranges = new Map()));
    for (const range of entry.ranges) {
      const entries = ranges.get(range);
      if (entries) entries.push(entry);
      else ranges.set(range, [entry]);
    }
    for (const [oldKey, old] of this.byKey) {
      if (now - old.at <= this.maxAgeMs) break;
      this.remove(oldKey);
    }
  }

  private remove(key: string): void {
    const entry = this.byKey.get(key);
    if (!entry) return;
    this.byKey.delete(key);
    const ranges = this.byRange.get(entry.stream)!;
    for (const range of entry.ranges) {
      const entries = ranges.get(range)!;
      entries.splice(entries.indexOf(entry), 1);
      if (entries.length === 0) ranges.delete(range);
    }
    if (ranges.size === 0) this.byRange.delete(entry.stream);
    for (const run of entry.runs) {
      const inRun = this.byRun.get(run)!.filter((one) => one.entry !== entry);
      if (inRun.length === 0) this.byRun.delete(run);
      else this.byRun.set(run, inRun);
    }
  }

  /**
   * The manifest whose batch holds the message with this msgID (at whatever sequence it had
   * then); for a message without one, or a manifest without msgIDs, the one holding `seq`.
   * A committed one first: a message named by several (a retry that did not know of a manifest
   * whose put timed out but landed) is stored once one of them is committed.
   */
  find(stream: string, seq: number, msgID: string): { key: string; manifest: Manifest } | undefined {
    const byId = msgID === '' ? [] : (this.byRun.get(runOf(stream, msgID)) ?? []).filter(({ entry, at }) => at.some((i) => entry.manifest.ids![i] === msgID)).map(({ entry }) => entry);
    // By sequence only where there is no msgID to go by: found by it, the message would be in byId.
    const bySeq = (this.byRange.get(stream)?.get(Math.floor(seq / RANGE)) ?? []).filter((entry) => (msgID === '' || entry.manifest.ids === undefined) && heldAt(entry.manifest, seq, msgID));
    const found = [...byId, ...bySeq];
    return found.find((entry) => entry.manifest.state === 'committed') ?? found[0];
  }
}

/**
 * Names a member of a manifest's batch: by its msgID when both the message and the manifest
 * have one, else by its sequence. Two messages with the same name are the same message.
 */
export function memberOf(manifest: Manifest, seq: number, msgID: string): string {
  return manifest.ids !== undefined && msgID !== '' ? `id ${msgID}` : `seq ${seq}`;
}

/** Whether a manifest's batch holds message `seq` with this msgID there (a manifest without msgIDs: any). */
function heldAt(manifest: Manifest, seq: number, msgID: string): boolean {
  const at = manifest.seqs.indexOf(seq);
  return at !== -1 && (manifest.ids === undefined || manifest.ids[at] === msgID);
}
