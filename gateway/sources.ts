/**
 * Ingestion sources and their API keys. A key authorizes ingestion into its own source only.
 * Keys are random 256-bit secrets shown once; only their SHA-256 is stored (a fast hash is
 * right for high-entropy secrets; a slow password hash would only cost every request).
 * Every gateway keeps an in-memory index of active key hashes, kept fresh by the state
 * store's watch, so a revoked key is refused as soon as the change reaches it.
 *
 * Caps, held across gateways by the state store's compare-and-set (state/cap-ledger.ts): a source
 * has at most MAX_KEYS_PER_SOURCE active keys, a tenant at most MAX_SOURCES_PER_TENANT sources.
 * A key may carry an expiry (an install token's, until the token is first used): past it the key
 * authenticates nothing and frees its place, and lists show it revoked then.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { sha256Hex } from '../core/hash.ts';
import { DEFAULT_TENANT_ID } from '../accounts/model.ts';
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { CapLedger, type MemberState } from '../state/cap-ledger.ts';
import { StateMirror } from '../state/mirror.ts';
import { recordOf } from '../state/shape.ts';
import type { StateStore } from '../state/store.ts';
import { ApiError } from '../core/errors.ts';

/** Active (not revoked, not expired) API keys a source may have; past it a new one is refused. */
export const MAX_KEYS_PER_SOURCE = 20;
/** Sources a tenant may have; past it a new one is refused. */
export const MAX_SOURCES_PER_TENANT = 100;

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
  /** When the key stops working unless settled first (an install token's key: settled when the token is used). */
  expiresAt?: string;
  revokedAt?: string;
}

export interface KeyOptions {
  /** What the key is issued for (shown in lists). */
  label?: string;
  /** When it stops working unless settleKey() is called before (ISO 8601). */
  expiresAt?: string;
  /** The key this one replaces (rotation): not counted against the cap, since it is revoked next. */
  replacing?: string;
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
const isApiKeyRecord = recordOf<ApiKeyRecord>({ id: 'string', sourceId: 'string', hash: 'string', expiresAt: 'string?', revokedAt: 'string?' });
/** Sources made before tenants reached ingestion have no tenantId until moveUntenanted() gives them one. */
const isStoredSource = recordOf<Omit<Source, 'tenantId'> & { tenantId?: string }>({ id: 'string', name: 'string', createdAt: 'string', tenantId: 'string?' });
const isSource = (value: unknown): value is Source => isStoredSource(value) && value.tenantId !== undefined;

export const hashApiKey = sha256Hex;

export class SourceRegistry {
  /** hash → active key record: the only thing the hot path reads. */
  private readonly activeByHash = new Map<string, ApiKeyRecord>();
  private readonly hashById = new Map<string, string>();
  private readonly keys: StateMirror<ApiKeyRecord>;
  private readonly ledger: CapLedger;

  constructor(private readonly store: StateStore, log?: Logger, private readonly now: () => number = Date.now) {
    this.keys = new StateMirror(store, API_KEYS, { validate: isApiKeyRecord, log });
    this.ledger = new CapLedger(store, now);
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

  /** The source a presented key belongs to, or undefined if the key is unknown, revoked or expired. */
  authenticate(apiKey: string): string | undefined {
    if (!apiKey.startsWith(KEY_PREFIX)) return undefined;
    const record = this.activeByHash.get(hashApiKey(apiKey));
    return record && !this.expired(record) ? record.sourceId : undefined;
  }

  /**
   * `tenantId`: the owner; without one, the default tenant (accounts/model.ts). Refused
   * (CapReachedError) when the tenant has MAX_SOURCES_PER_TENANT sources.
   */
  async createSource(name: string, tenantId: string = DEFAULT_TENANT_ID): Promise<Source & { apiKey: string; keyId: string }> {
    const source: Source = { id: randomUUID(), name, tenantId, createdAt: new Date(this.now()).toISOString() };
    await this.ledger.claim(`sources/${tenantId}`, source.id, {
      cap: MAX_SOURCES_PER_TENANT,
      members: async () => new Map((await this.storedSources(tenantId)).map((s) => [s.id, { ended: false }])),
      refuse: (cap) => new CapReachedError(`A tenant may have at most ${cap} sources, and this one has ${cap}: add keys to an existing source instead`),
    });
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
        keys: keys.filter((k) => k.sourceId === source.id).map((k) => this.keyView(k)),
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

  /** Whether a key (by id) exists and is neither revoked nor expired, as this gateway last heard. */
  keyActive(keyId: string): boolean {
    const hash = this.hashById.get(keyId);
    const record = hash === undefined ? undefined : this.activeByHash.get(hash);
    return record !== undefined && !this.expired(record);
  }

  /**
   * Issues a key for the source. Refused (CapReachedError) when the source has
   * MAX_KEYS_PER_SOURCE active keys, not counting `replacing`.
   */
  async addKey(sourceId: string, options: KeyOptions = {}): Promise<IssuedKey> {
    if (!(await this.getSource(sourceId))) throw new NotFoundError(`no source ${sourceId}`);
    const apiKey = KEY_PREFIX + randomBytes(32).toString('base64url');
    const record: ApiKeyRecord = {
      id: `key_${randomBytes(6).toString('hex')}`,
      sourceId,
      hash: hashApiKey(apiKey),
      createdAt: new Date(this.now()).toISOString(),
      ...(options.label ? { label: options.label } : {}),
      ...(options.expiresAt ? { expiresAt: options.expiresAt } : {}),
    };
    await this.ledger.claim(keysScope(sourceId), record.id, {
      cap: MAX_KEYS_PER_SOURCE,
      members: () => this.keyStates(sourceId),
      ...(record.expiresAt ? { until: Date.parse(record.expiresAt) } : {}),
      ...(options.replacing ? { except: options.replacing } : {}),
      refuse: (cap) => new CapReachedError(`A source may have at most ${cap} active API keys, and this one has ${cap}: revoke one first`),
    });
    await this.keys.set(record.id, record);
    return { keyId: record.id, sourceId, apiKey };
  }

  /**
   * Makes a key that expires (an install token's) permanent if it is still active; false if it
   * is revoked, gone or past its expiry. Reads the store, not this gateway's copy, which may lag
   * behind a key created a moment ago through another gateway.
   */
  async settleKey(keyId: string): Promise<boolean> {
    const stored = await this.store.get<unknown>(API_KEYS, keyId);
    if (!isApiKeyRecord(stored) || stored.revokedAt || this.expired(stored)) return false;
    if (stored.expiresAt === undefined) return true;
    // The place under the cap first: once it holds for good, the key may.
    if (!(await this.ledger.settle(keysScope(stored.sourceId), keyId))) return false;
    try {
      await this.keys.modify(keyId, (record) => {
        if (!record || record.revokedAt || this.expired(record)) throw new KeyEnded();
        const { expiresAt: _expiresAt, ...permanent } = record;
        return permanent;
      });
      return true;
    } catch (err) {
      if (err instanceof KeyEnded) return false;
      throw err;
    }
  }

  /** Revokes by key id or by the key itself. */
  async revokeKey(keyIdOrApiKey: string): Promise<Omit<ApiKeyRecord, 'hash'>> {
    const found = keyIdOrApiKey.startsWith(KEY_PREFIX)
      ? (await this.storedKeys()).find((k) => k.hash === hashApiKey(keyIdOrApiKey))
      : await this.store.get<unknown>(API_KEYS, keyIdOrApiKey);
    if (!isApiKeyRecord(found)) throw new NotFoundError('no such API key');
    // Compare-and-set: a key settled at the same moment is revoked too, not brought back.
    const revoked = await this.keys.modify(found.id, (record) => ({ ...(record ?? found), revokedAt: record?.revokedAt ?? new Date(this.now()).toISOString() }));
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

  /** The source's keys as members of its cap: ended when revoked or expired. */
  private async keyStates(sourceId: string): Promise<Map<string, MemberState>> {
    const keys = (await this.storedKeys()).filter((k) => k.sourceId === sourceId);
    return new Map(keys.map((k) => [k.id, {
      ended: Boolean(k.revokedAt) || this.expired(k),
      ...(k.expiresAt === undefined ? {} : { until: Date.parse(k.expiresAt) }),
    }]));
  }

  /** A date that does not parse counts as expired. */
  private expired(record: { expiresAt?: string }): boolean {
    return record.expiresAt !== undefined && !(Date.parse(record.expiresAt) > this.now());
  }

  /** A key as lists show it: no hash; one that expired unused shows as revoked then (it never worked for anyone). */
  private keyView({ hash: _hash, ...visible }: ApiKeyRecord): Omit<ApiKeyRecord, 'hash'> {
    if (visible.revokedAt || visible.expiresAt === undefined || !this.expired(visible)) return visible;
    return { ...visible, revokedAt: visible.expiresAt };
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

function keysScope(sourceId: string): string {
  return `keys/${sourceId}`;
}

export class NotFoundError extends Error {
  override name = 'NotFoundError';
}

/** Past a cap: a 409 on the console's API, the message on the CLI. */
export class CapReachedError extends ApiError {
  constructor(message: string) {
    super(409, message);
    this.name = 'CapReachedError';
  }
}

/** Thrown inside a compare-and-set to leave a key that ended as it is. */
class KeyEnded extends Error {}
