/**
 * A tenant's API keys for the notification endpoint: each bound to one site, shown once when
 * issued and stored as its hash (with a short prefix to recognise it by), revoked for good.
 */
import { randomBytes } from 'node:crypto';
import { newId as id } from '../../accounts/index.ts';
import { sha256Hex } from '../../core/hash.ts';
import { notFound } from '../errors.ts';
import type { RelayApiKey } from '../model.ts';
import { now, type Actor, type AdminContext } from './context.ts';
import { apiKeyView } from './views.ts';

const API_KEY_PREFIX = 'rk_';

export class ApiKeyAdmin {
  constructor(private readonly c: AdminContext) {}

  /** Issues a key bound to one site; the key is returned this once and stored hashed. */
  async create(actor: Actor, body: unknown) {
    this.c.require(actor, 'admin');
    const input = this.c.validateBody<{ siteId: string; name: string }>('CreateApiKey', body);
    const site = this.c.site(actor, input.siteId);
    const apiKey = API_KEY_PREFIX + randomBytes(32).toString('base64url');
    const record: RelayApiKey = {
      id: id('key'),
      tenantId: actor.tenantId,
      siteId: site.id,
      name: input.name,
      hash: sha256Hex(apiKey),
      prefix: apiKey.slice(0, API_KEY_PREFIX.length + 6),
      createdAt: now(),
      updatedAt: now(),
    };
    await this.c.store.apiKeys.put(record);
    return { ...apiKeyView(record), apiKey };
  }

  list(actor: Actor) {
    return this.c.store.apiKeys.filter((key) => key.tenantId === actor.tenantId).map(apiKeyView);
  }

  async revoke(actor: Actor, keyId: string) {
    this.c.require(actor, 'admin');
    const key = this.c.store.apiKeys.get(keyId);
    if (!key || key.tenantId !== actor.tenantId) throw notFound('API key');
    if (key.revokedAt) return apiKeyView(key);
    return apiKeyView(await this.c.change(this.c.store.apiKeys, key.id, 'API key', (current) => ({ ...current, revokedAt: current.revokedAt ?? now() })));
  }
}
