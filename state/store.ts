import { SluiceError } from '../core/errors.ts';
/**
 * The state store holds configuration shared by every gateway: sources, API key hashes and,
 * later, agent configs and relay settings. Drivers: LocalStateStore (embedded, under the
 * data dir) and, in cluster mode, NATS KV. Values are JSON.
 */
export type StateChange<T> = { key: string; value: T | undefined };

/**
 * What a driver tells a reader besides values, so the reader's owner can count it and show it in
 * readiness. Reads never throw because of a stored value: a value that is not JSON is skipped,
 * as if its key held nothing, and reported here.
 */
export type StateEvent =
  /** The value of `key` is not JSON: skipped (the driver logged it). */
  | { type: 'bad_value'; key: string }
  /** The watch ended or failed (`reason`); it is being re-opened from the last revision it saw. */
  | { type: 'interrupted'; reason: string }
  /** The watch is open again; the changes made while it was closed follow. */
  | { type: 'resumed' };

export type StateEventHandler = (event: StateEvent) => void;

/** A value and its revision: a number that changes on every write of the key, for update(). */
export interface Versioned<T> {
  value: T;
  revision: number;
}

export interface StateStore {
  start(): Promise<void>;
  shutdown(): Promise<void>;
  /** The value, a copy the caller may change; undefined when absent or not JSON. */
  get<T>(bucket: string, key: string): Promise<T | undefined>;
  put<T>(bucket: string, key: string, value: T): Promise<void>;
  /**
   * Puts only if the key holds no value: the new revision if this call created it, undefined
   * if the key was taken. Atomic across every process sharing the store, so it can reserve a
   * unique name or use up a single-use token.
   */
  create<T>(bucket: string, key: string, value: T): Promise<number | undefined>;
  /** The value with its revision, for a read-modify-write with update(); undefined when absent. */
  getVersioned<T>(bucket: string, key: string): Promise<Versioned<T> | undefined>;
  /**
   * Compare-and-set: writes only if the key is still at `revision` (read by getVersioned); the
   * new revision if it did, undefined if not. Atomic across every process sharing the store: of
   * two writers that read the same revision, one wins and the other reads again, so neither
   * loses the other's change.
   */
  update<T>(bucket: string, key: string, value: T, revision: number): Promise<number | undefined>;
  delete(bucket: string, key: string): Promise<void>;
  /**
   * Entries of `bucket` are removed `ttlMs` after their last write (idempotency records, used
   * tokens). Call before the bucket's first use. Readers never see an expired entry; a watch is
   * not told when one expires.
   */
  expireAfter(bucket: string, ttlMs: number): void;
  /** Every key and value (copies); values that are not JSON are skipped and reported to onEvent. */
  list<T>(bucket: string, onEvent?: StateEventHandler): Promise<Array<[string, T]>>;
  /**
   * Calls onChange for every later change of the bucket (value undefined on delete), with a copy
   * of the value. A watch outlives failures of the driver: it is re-opened without missing a
   * change, and onEvent hears about that and about values skipped. Returns a function that stops
   * watching.
   */
  watch<T>(bucket: string, onChange: (change: StateChange<T>) => void, onEvent?: StateEventHandler): () => void;
}

/**
 * Runs a write and turns its failure (a disk that refuses the journal, NATS unreachable) into
 * `unavailable`: the caller answers 503 + Retry-After and the client tries again, never 500.
 * A SluiceError (a refusal the store itself chose) passes as it is.
 */
export async function stateWrite<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (err instanceof SluiceError) throw err;
    throw new SluiceError('unavailable', `the state store could not be written: ${(err as Error).message}`, { cause: err });
  }
}
