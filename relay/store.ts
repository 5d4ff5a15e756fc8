/**
 * The relay's configuration in the state store (local files embedded, NATS KV in a cluster),
 * with an in-memory copy of every bucket on each gateway, kept fresh by the store's watch:
 * reads never wait on the store, and a change made on one gateway (a revoked API key, a
 * deactivated site) reaches every other within the watch's latency.
 */
import { createHash } from 'node:crypto';
import type { StateStore } from '../state/store.ts';
import type { Form, RelayApiKey, Site, Template, Tenant, User } from './model.ts';

/** One bucket, mirrored in memory. */
export class Collection<T extends { id: string }> {
  private readonly items = new Map<string, T>();
  private unwatch: (() => void) | undefined;
  private readonly listeners: Array<(id: string, value: T | undefined) => void> = [];

  constructor(private readonly store: StateStore, readonly bucket: string) {}

  async start(): Promise<void> {
    // Watch first, then list, so no change between the two is missed.
    this.unwatch = this.store.watch<T>(this.bucket, ({ key, value }) => this.apply(key, value));
    for (const [id, value] of await this.store.list<T>(this.bucket)) this.apply(id, value);
  }

  stop(): void {
    this.unwatch?.();
  }

  /** Calls fn on every change seen (for indexes). */
  onChange(fn: (id: string, value: T | undefined) => void): void {
    this.listeners.push(fn);
  }

  get(id: string): T | undefined {
    return this.items.get(id);
  }

  values(): T[] {
    return [...this.items.values()];
  }

  find(predicate: (item: T) => boolean): T | undefined {
    for (const item of this.items.values()) if (predicate(item)) return item;
    return undefined;
  }

  filter(predicate: (item: T) => boolean): T[] {
    return this.values().filter(predicate);
  }

  async put(item: T): Promise<T> {
    await this.store.put(this.bucket, item.id, item);
    this.apply(item.id, item);
    return item;
  }

  async delete(id: string): Promise<void> {
    await this.store.delete(this.bucket, id);
    this.apply(id, undefined);
  }

  private apply(id: string, value: T | undefined): void {
    if (value) this.items.set(id, value);
    else this.items.delete(id);
    for (const listener of this.listeners) listener(id, value);
  }
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

export class RelayStore {
  readonly tenants: Collection<Tenant>;
  readonly users: Collection<User>;
  readonly sites: Collection<Site>;
  readonly forms: Collection<Form>;
  readonly templates: Collection<Template>;
  readonly apiKeys: Collection<RelayApiKey>;
  /** hash → active key: the hot path of POST /notifications. */
  private readonly activeKeys = new Map<string, RelayApiKey>();
  private readonly keyHashById = new Map<string, string>();

  constructor(readonly state: StateStore) {
    this.tenants = new Collection(state, 'relay_tenants');
    this.users = new Collection(state, 'relay_users');
    this.sites = new Collection(state, 'relay_sites');
    this.forms = new Collection(state, 'relay_forms');
    this.templates = new Collection(state, 'relay_templates');
    this.apiKeys = new Collection(state, 'relay_api_keys');
    this.apiKeys.onChange((id, key) => {
      const previous = this.keyHashById.get(id);
      if (previous) this.activeKeys.delete(previous);
      this.keyHashById.delete(id);
      if (key && !key.revokedAt) {
        this.activeKeys.set(key.hash, key);
        this.keyHashById.set(id, key.hash);
      }
    });
  }

  private get collections() {
    return [this.tenants, this.users, this.sites, this.forms, this.templates, this.apiKeys];
  }

  async start(): Promise<void> {
    for (const collection of this.collections) await collection.start();
  }

  shutdown(): void {
    for (const collection of this.collections) collection.stop();
  }

  /** The active API key a presented key is, if any (revoked keys are dropped from the index). */
  apiKeyFor(presented: string): RelayApiKey | undefined {
    return this.activeKeys.get(sha256Hex(presented));
  }

  siteByKey(siteKey: string): Site | undefined {
    return this.sites.find((site) => site.siteKey === siteKey);
  }

  userByEmail(email: string): User | undefined {
    const wanted = email.trim().toLowerCase();
    return this.users.find((user) => user.email === wanted);
  }
}
