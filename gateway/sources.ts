/**
 * Ingestion sources and their API keys. A key authorizes ingestion into its own source only.
 * Keys are random 256-bit secrets shown once; only their SHA-256 is stored (a fast hash is
 * right for high-entropy secrets; a slow password hash would only cost every request).
 * Every gateway keeps an in-memory index of active key hashes, kept fresh by the state
 * store's watch, so a revoked key is refused as soon as the change reaches it.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { sha256Hex } from '../core/hash.ts';
import { DEFAULT_TENANT_ID } from '../accounts/model.ts';
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { StateMirror } from '../state/mirror.ts';
import { recordOf } from '../state/shape.ts';
import type { StateStore } from '../state/store.ts';

export interface Source {
  id: string;
  name: string;
  /** The tenant that owns the source (accounts/); its users see its data. */
  tenantId: string;
  createdAt: string;
}

export interface ApiKeyRecord {
  /** Public identifier of the key (safe to log and to show in lists). */
  id: string;
  sourceId: string;
  /** Hex SHA-256 of the key. */
  hash: string;
  createdAt: string;
  /** What the key was issued for, when not by hand (e.g. "install token itk_…"). */
  label?: string;
  revokedAt?: string;
}

/** A newly created key: the only moment its plaintext exists. */
export interface IssuedKey {
  keyId: string;
  sourceId: string;
  apiKey: string;
}

const SOURCES = 'sources';
const API_KEYS = 'api_keys';
const KEY_PREFIX = 'slk_';

/** What the key index relies on: a record without a string hash authenticates nothing. */
const isApiKeyRecord = recordOf<ApiKeyRecord>({ id: 'string', sourceId: 'string', hash: 'string', revokedAt: 'string?' });
/** Sources made before tenants reached ingestion have no tenantId until moveUntenanted() gives them one. */
const isStoredSource = recordOf<Omit<Source, 'tenantId'> & { tenantId?: string }>({ id: 'string', name: 'string', createdAt: 'string', tenantId: 'string?' });
const isSource = (value: unknown): value is Source => isStoredSource(value) && value.tenantId !== undefined;

export const hashApiKey = sha256Hex;

export class SourceRegistry {
  /** hash → active key record: the only thing the hot path reads. */
  private readonly activeByHash = new Map<string, ApiKeyRecord>();
  private readonly hashById = new Map<string, string>();
  private readonly keys: StateMirror<ApiKeyRecord>;

  constructor(private readonly store: StateStore, log?: Logger) {
    this.keys = new StateMirror(store, API_KEYS, { validate: isApiKeyRecord, log });
    this.keys.onChange((id, record) => this.index(id, record));
  }

  async start(): Promise<void> {
    await this.keys.start();
  }

  async shutdown(): Promise<void> {
    this.keys.stop();
  }

  /** The key index's health, for readiness (`state.api_keys`). */
  status(): ComponentStatus {
    return this.keys.status();
  }

  /** The source a presented key belongs to, or undefined if the key is unknown or revoked. */
  authenticate(apiKey: string): string | undefined {
    if (!apiKey.startsWith(KEY_PREFIX)) return undefined;
    return this.activeByHash.get(hashApiKey(apiKey))?.sourceId;
  }

  /** `tenantId`: the owner; without one, the default tenant (accounts/model.ts). */
  async createSource(name: string, tenantId: string = DEFAULT_TENANT_ID): Promise<Source & { apiKey: string; keyId: string }> {
    const source: Source = { id: randomUUID(), name, tenantId, createdAt: new Date().toISOString() };
    await this.store.put(SOURCES, source.id, source);
    const key = await this.addKey(source.id);
    return { ...source, apiKey: key.apiKey, keyId: key.keyId };
  }

  /** Every source, or the tenant's, with its keys (never their hashes). */
  async listSources(tenantId?: string): Promise<Array<Source & { keys: Array<Omit<ApiKeyRecord, 'hash'>> }>> {
    const keys = await this.storedKeys();
    return (await this.storedSources(tenantId))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt))
      .map((source) => ({
        ...source,
        keys: keys.filter((k) => k.sourceId === source.id).map(({ hash: _hash, ...visible }) => visible),
      }));
  }

  /**
   * The migration that gave sources their tenant: every source made before has none, and is
   * moved to `tenantId` (the default tenant). Returns how many moved; running it again moves none.
   */
  async moveUntenanted(tenantId: string): Promise<number> {
    let moved = 0;
    for (const [id, value] of await this.store.list<unknown>(SOURCES)) {
      if (!isStoredSource(value) || value.tenantId !== undefined) continue;
      await this.store.put(SOURCES, id, { ...value, tenantId });
      moved++;
    }
    return moved;
  }

  /** Whether any source still lacks a tenant (moveUntenanted has work). */
  async hasUntenanted(): Promise<boolean> {
    return (await this.store.list<unknown>(SOURCES)).some(([, value]) => isStoredSource(value) && value.tenantId === undefined);
  }

  /** The tenant's source ids: what the console's queries are restricted to. */
  async sourceIdsOf(tenantId: string): Promise<string[]> {
    // The sources only, not their keys: every console read asks this.
    return (await this.storedSources(tenantId)).map((source) => source.id);
  }

  async getSource(id: string): Promise<Source | undefined> {
    const source = await this.store.get<unknown>(SOURCES, id);
    return isSource(source) ? source : undefined;
  }

  /** Whether a key (by id) exists and is not revoked, as this gateway last heard. */
  keyActive(keyId: string): boolean {
    return this.hashById.has(keyId);
  }

  /**
   * Whether a key exists and is not revoked, asking the store when this gateway has not heard of
   * it: its watch may lag behind a key created a moment ago through another gateway.
   */
  async keyActiveInStore(keyId: string): Promise<boolean> {
    if (this.keyActive(keyId)) return true;
    const record = await this.store.get<unknown>(API_KEYS, keyId);
    return isApiKeyRecord(record) && !record.revokedAt;
  }

  async addKey(sourceId: string, label?: string): Promise<IssuedKey> {
    if (!(await this.getSource(sourceId))) throw new NotFoundError(`no source ${sourceId}`);
    const apiKey = KEY_PREFIX + randomBytes(32).toString('base64url');
    const record: ApiKeyRecord = {
      id: `key_${randomBytes(6).toString('hex')}`,
      sourceId,
      hash: hashApiKey(apiKey),
      createdAt: new Date().toISOString(),
      ...(label ? { label } : {}),
    };
    await this.keys.set(record.id, record);
    return { keyId: record.id, sourceId, apiKey };
  }

  /** Revokes by key id or by the key itself. */
  async revokeKey(keyIdOrApiKey: string): Promise<Omit<ApiKeyRecord, 'hash'>> {
    const record = keyIdOrApiKey.startsWith(KEY_PREFIX)
      ? (await this.storedKeys()).find((k) => k.hash === hashApiKey(keyIdOrApiKey))
      : await this.store.get<unknown>(API_KEYS, keyIdOrApiKey);
    if (!isApiKeyRecord(record)) throw new NotFoundError('no such API key');
    const revoked = { ...record, revokedAt: record.revokedAt ?? new Date().toISOString() };
    await this.keys.set(record.id, revoked);
    const { hash: _hash, ...visible } = revoked;
    return visible;
  }

  /** Every source with a tenant in the store, or the tenant's. */
  private async storedSources(tenantId?: string): Promise<Source[]> {
    return (await this.store.list<unknown>(SOURCES)).map(([, s]) => s).filter(isSource)
      .filter((source) => tenantId === undefined || source.tenantId === tenantId);
  }

  /** Every readable key record in the store (not only the active ones this gateway indexes). */
  private async storedKeys(): Promise<ApiKeyRecord[]> {
    return (await this.store.list<unknown>(API_KEYS)).map(([, k]) => k).filter(isApiKeyRecord);
  }

  private index(id: string, record: ApiKeyRecord | undefined): void {
    const previous = this.hashById.get(id);
    if (previous) this.activeByHash.delete(previous);
    this.hashById.delete(id);
    if (record && !record.revokedAt) {
      this.activeByHash.set(record.hash, record);
      this.hashById.set(id, record.hash);
    }
  }
}

export class NotFoundError extends Error {
  override name = 'NotFoundError';
}
