/**
 * The state store holds configuration shared by every gateway: sources, API key hashes and,
 * later, agent configs and relay settings. Drivers: LocalStateStore (embedded, under the
 * data dir) and, in cluster mode, NATS KV. Values are JSON.
 */
export type StateChange<T> = { key: string; value: T | undefined };

export interface StateStore {
  start(): Promise<void>;
  shutdown(): Promise<void>;
  get<T>(bucket: string, key: string): Promise<T | undefined>;
  put<T>(bucket: string, key: string, value: T): Promise<void>;
  /**
   * Puts only if the key holds no value; true if this call created it. Atomic across every
   * process sharing the store, so it can reserve a unique name or use up a single-use token.
   */
  create<T>(bucket: string, key: string, value: T): Promise<boolean>;
  delete(bucket: string, key: string): Promise<void>;
  list<T>(bucket: string): Promise<Array<[string, T]>>;
  /**
   * Calls onChange for every later change of the bucket (value undefined on delete).
   * Returns a function that stops watching.
   */
  watch<T>(bucket: string, onChange: (change: StateChange<T>) => void): () => void;
}
