/**
 * Idempotency-Key (relay spec 4.4) for submissions, notifications and tenant discovery. A key is
 * claimed with the state store's atomic create, so of two requests with one key — on one
 * gateway or on two sharing NATS KV — exactly one runs; the other is told 409 while it runs
 * and gets its stored answer afterwards. The record is scoped (endpoint and site, API key or
 * client), so two tenants choosing the same key never meet.
 *
 * What is stored: the request's fingerprint (a hash of its body as canonical JSON, so key order
 * and spacing do not matter), when the key was first used, and, once the request succeeded,
 * its answer. A request that failed releases its key: a retry runs anew, as a client retrying
 * after a 503 expects. A claim holds a lease: if the process died before answering, the key is
 * free again once the lease ran out, never wedged. After REPLAY_WINDOW_MS a key starts afresh.
 *
 * A claim carries the key's first use. A retry of the same body within the window has the same
 * one, so what the request makes (a submission, its delivery jobs) is named the same again, and
 * what a failed or interrupted run already made is recognised, not made twice.
 */
import { createHash } from 'node:crypto';
import type { StateStore } from '../state/store.ts';
import { conflict, RelayError } from './errors.ts';

export const IDEMPOTENCY_BUCKET = 'relay_idempotency';
/** A key used again within this time replays the first answer; later it is a new request. */
export const REPLAY_WINDOW_MS = 24 * 3600_000;
export const IDEMPOTENCY_HEADER = 'idempotency-key';

interface IdempotencyRecord {
  fingerprint: string;
  /** When the key was first used (epoch ms): the replay window runs from here. */
  firstAt: number;
  state: 'running' | 'done' | 'released';
  /** While running: when the claim lapses if its request never finished. */
  leaseUntil: number;
  response?: StoredResponse;
}

export interface StoredResponse {
  status: number;
  body: string;
}

/** What begin() decided. */
export type IdempotentStart =
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'run'; claim: Claim };

/** The first use of a key with a body: the same on every retry within the replay window. */
export interface FirstUse {
  /** Unique per scope, key and first use. */
  id: string;
  /** Epoch ms. */
  at: number;
}

export interface Claim {
  readonly firstUse: FirstUse;
  /** Stores the answer for replays. */
  finish(response: StoredResponse): Promise<void>;
  /** Frees the key after a failure: a retry runs anew. */
  release(): Promise<void>;
  /** False once the lease is nearly out: past that point the work must not start. */
  holds(): boolean;
}

/** The Idempotency-Key header's value; undefined when absent. 400 when out of range. */
export function idempotencyKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (header.length < 8 || header.length > 255) throw new RelayError(400, 'Idempotency-Key must be between 8 and 255 characters');
  return header;
}

/** A hash of the body as canonical JSON (object keys sorted at every level). */
export function fingerprint(body: unknown): string {
  return createHash('sha256').update(canonicalJson(body)).digest('base64url');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export interface IdempotencyOptions {
  /** How long a claim is held for a request that never finishes (a crash). */
  leaseMs: number;
  now?: () => number;
}

export class Idempotency {
  private readonly now: () => number;

  constructor(private readonly state: StateStore, private readonly options: IdempotencyOptions) {
    this.now = options.now ?? Date.now;
    // Records outlive the replay window a little; readers check firstAt themselves.
    state.expireAfter(IDEMPOTENCY_BUCKET, REPLAY_WINDOW_MS + 3600_000);
  }

  /**
   * Claims `key` within `scope` for a request with this fingerprint, or says what to answer:
   * the stored response (replay), 409 while the first request runs, 422 for another body.
   */
  async begin(scope: string, key: string, print: string): Promise<IdempotentStart> {
    const id = createHash('sha256').update(`${scope}\n${key}`).digest('base64url');
    for (let attempt = 0; attempt < 10; attempt++) {
      const now = this.now();
      const claim: IdempotencyRecord = { fingerprint: print, firstAt: now, state: 'running', leaseUntil: now + this.options.leaseMs };
      const created = await this.state.create(IDEMPOTENCY_BUCKET, id, claim);
      if (created !== undefined) return this.claimed(id, claim, created);
      const existing = await this.state.getVersioned<IdempotencyRecord>(IDEMPOTENCY_BUCKET, id);
      if (!existing) continue; // expired or deleted in between: create again
      const record = existing.value;
      const free = record.state === 'released' || now - record.firstAt >= REPLAY_WINDOW_MS || (record.state === 'running' && record.leaseUntil <= now);
      if (free) {
        // The same body within the window is the same request, retried: it keeps its first use.
        const again = record.fingerprint === print && now - record.firstAt < REPLAY_WINDOW_MS;
        const renewed = again ? { ...claim, firstAt: record.firstAt } : claim;
        const taken = await this.state.update(IDEMPOTENCY_BUCKET, id, renewed, existing.revision);
        if (taken !== undefined) return this.claimed(id, renewed, taken);
        continue; // another request took it first: look again
      }
      if (record.fingerprint !== print) throw new RelayError(422, 'Idempotency-Key has already been used with a different request body');
      if (record.state === 'running') throw conflict('A request with this Idempotency-Key is already in progress. Retry shortly.');
      return { kind: 'replay', response: record.response! };
    }
    // Only a storm of takeovers gets here; the key is busy, as far as this request can tell.
    throw conflict('A request with this Idempotency-Key is already in progress. Retry shortly.');
  }

  /** The claim just written at `ours`: the revision the compare-and-set that ends it expects. */
  private claimed(id: string, claim: IdempotencyRecord, ours: number): IdempotentStart {
    // Finish and release change the record only if it is still ours (no takeover after a lapsed lease).
    const end = (record: IdempotencyRecord) => this.state.update(IDEMPOTENCY_BUCKET, id, record, ours).then(() => undefined);
    // Work starts only with half the lease left: a slow request gives up before another may take the key.
    const startBy = claim.leaseUntil - this.options.leaseMs / 2;
    return {
      kind: 'run',
      claim: {
        firstUse: { id: `${id}.${claim.firstAt}`, at: claim.firstAt },
        finish: (response) => end({ ...claim, state: 'done', response }),
        release: () => end({ ...claim, state: 'released' }),
        holds: () => this.now() < startBy,
      },
    };
  }
}
