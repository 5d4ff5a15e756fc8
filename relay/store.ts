/**
 * The relay's configuration in the state store (local files embedded, NATS KV in a cluster),
 * with an in-memory copy of every bucket on each gateway, kept fresh by the store's watch:
 * reads never wait on the store, and a change made on one gateway (a revoked API key, a
 * deactivated site) reaches every other within the watch's latency.
 */
import { sha256Hex } from '../core/hash.ts';
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import type { AccountStore } from '../accounts/store.ts';
import { Collection } from '../state/collection.ts';
import type { StateStore } from '../state/store.ts';
import type { DeliverySettings, Form, RelayApiKey, Site, Template } from './model.ts';

/** Keeps `index` (a secondary key → record) in step with the collection. */
function indexBy<T extends { id: string }>(collection: Collection<T>, index: Map<string, T>, keyOf: (item: T) => string): void {
  const keys = new Map<string, string>();
  collection.onChange((id, item) => {
    const previous = keys.get(id);
    if (previous !== undefined && index.get(previous)?.id === id) index.delete(previous);
    keys.delete(id);
    if (item) {
      index.set(keyOf(item), item);
      keys.set(id, keyOf(item));
    }
  });
}

export class RelayStore {
  readonly sites: Collection<Site>;
  readonly forms: Collection<Form>;
  readonly templates: Collection<Template>;
  readonly apiKeys: Collection<RelayApiKey>;
  /** Each tenant's email and WhatsApp settings, keyed by tenant id. */
  readonly deliverySettings: Collection<DeliverySettings>;
  /** hash → active key: the hot path of POST /notifications. */
  private readonly activeKeys = new Map<string, RelayApiKey>();
  private readonly keyHashById = new Map<string, string>();
  /** siteKey → site and `siteId/formKey` → form: public submissions find theirs in one lookup. */
  private readonly sitesByKey = new Map<string, Site>();
  private readonly formsByKey = new Map<string, Form>();
  /** What the public endpoints' CORS preflight allows, rebuilt after a change of any site. */
  private corsOrigins: { any: boolean; origins: Set<string> } | undefined;

  /** `accounts`: tenants and users, shared with the console (accounts/); opened and stopped by its owner. */
  constructor(readonly state: StateStore, readonly accounts: AccountStore, log?: Logger) {
    const stamped = { createdAt: 'string', updatedAt: 'string' } as const;
    this.sites = new Collection(state, 'relay_sites', {
      ...stamped, tenantId: 'string', name: 'string', siteKey: 'string', active: 'boolean', allowedOrigins: 'array', captcha: 'object?',
    }, log);
    this.forms = new Collection(state, 'relay_forms', {
      ...stamped, tenantId: 'string', siteId: 'string', formKey: 'string', name: 'string', active: 'boolean',
      templateId: 'string?', recipients: 'array', webhooks: 'array',
    }, log);
    this.templates = new Collection(state, 'relay_templates', { ...stamped, tenantId: 'string', name: 'string', subject: 'string', html: 'string' }, log);
    this.apiKeys = new Collection(state, 'relay_api_keys', {
      ...stamped, tenantId: 'string', siteId: 'string', name: 'string', hash: 'string', prefix: 'string', revokedAt: 'string?',
    }, log);
    this.deliverySettings = new Collection(state, 'relay_delivery_settings', { tenantId: 'string', updatedAt: 'string', email: 'object?', whatsapp: 'object?' }, log);
    indexBy(this.sites, this.sitesByKey, (site) => site.siteKey);
    indexBy(this.forms, this.formsByKey, (form) => `${form.siteId}/${form.formKey}`);
    this.sites.onChange(() => (this.corsOrigins = undefined));
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
    return [this.sites, this.forms, this.templates, this.apiKeys, this.deliverySettings];
  }

  async start(): Promise<void> {
    for (const collection of this.collections) await collection.start();
  }

  shutdown(): void {
    for (const collection of this.collections) collection.stop();
  }

  /** Each collection's health by bucket, for readiness (`state.relay_sites`...). */
  statuses(): Record<string, ComponentStatus> {
    return Object.fromEntries(this.collections.map((collection) => [collection.bucket, collection.status()]));
  }

  /** The active API key a presented key is, if any (revoked keys are dropped from the index). */
  apiKeyFor(presented: string): RelayApiKey | undefined {
    return this.activeKeys.get(sha256Hex(presented));
  }

  /**
   * The key's record as the store holds it now, when it is active: a key revoked on another
   * gateway is refused on the very next request, not only once this gateway's watch brings it.
   */
  async currentApiKey(key: RelayApiKey): Promise<RelayApiKey | undefined> {
    const stored = await this.state.get<RelayApiKey>(this.apiKeys.bucket, key.id);
    return stored && !stored.revokedAt && stored.hash === key.hash ? stored : undefined;
  }

  siteByKey(siteKey: string): Site | undefined {
    return this.sitesByKey.get(siteKey);
  }

  formByKey(siteId: string, formKey: string): Form | undefined {
    return this.formsByKey.get(`${siteId}/${formKey}`);
  }

  /**
   * Origins an active site accepts submissions from; `any` when an active site has no list (it
   * accepts every origin). For the CORS preflight, which cannot know the site it is for.
   */
  allowedOrigins(): { any: boolean; origins: Set<string> } {
    if (!this.corsOrigins) {
      const active = this.sites.filter((site) => site.active);
      this.corsOrigins = { any: active.some((site) => site.allowedOrigins.length === 0), origins: new Set(active.flatMap((site) => site.allowedOrigins)) };
    }
    return this.corsOrigins;
  }
}
