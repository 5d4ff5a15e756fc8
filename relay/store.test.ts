/**
 * RelayStore's lookups for the public endpoints: a revoked API key is refused on the next
 * request even by a gateway whose watch has not brought the revocation yet, and the indexes
 * (siteKey, formKey, allowed origins) follow changes.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { AccountStore } from '../accounts/store.ts';
import { LocalStateStore } from '../state/local.ts';
import type { StateStore } from '../state/store.ts';
import type { RelayApiKey, Site } from './model.ts';
import { sha256Hex } from '../core/hash.ts';
import { RelayStore } from './store.ts';

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function localStore(): Promise<LocalStateStore> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-relay-store-'));
  dirs.push(dir);
  const state = new LocalStateStore(dir);
  await state.start();
  return state;
}

/** The store as a gateway whose watch is stuck sees it: reads go through, changes never arrive. */
function deaf(state: StateStore): StateStore {
  return new Proxy(state, { get: (target, name) => (name === 'watch' ? () => () => {} : Reflect.get(target, name).bind(target)) });
}

const stamp = { createdAt: '2026-01-01T00:00:00Z', updatedAt: '2026-01-01T00:00:00Z' };

describe('RelayStore', () => {
  it('refuses a key revoked elsewhere before its own copy hears of it', async () => {
    const state = await localStore();
    const key: RelayApiKey = { id: 'key_1', tenantId: 't', siteId: 's', name: 'backend', hash: sha256Hex('rk_secret'), prefix: 'rk_sec', ...stamp };
    await state.put('relay_api_keys', key.id, key);
    const store = new RelayStore(deaf(state), new AccountStore(state), pino({ level: 'silent' }));
    await store.start();
    const known = store.apiKeyFor('rk_secret')!;
    expect(await store.currentApiKey(known)).toMatchObject({ id: 'key_1' });
    await state.put('relay_api_keys', key.id, { ...key, revokedAt: '2026-01-02T00:00:00Z' });
    // This copy still lists the key as active; the store itself says revoked, and that decides.
    expect(store.apiKeyFor('rk_secret')).toBeDefined();
    expect(await store.currentApiKey(known)).toBeUndefined();
    await state.delete('relay_api_keys', key.id);
    expect(await store.currentApiKey(known)).toBeUndefined();
    store.shutdown();
  });

  it('finds sites by siteKey and forms by formKey, and knows the origins active sites allow', async () => {
    const state = await localStore();
    const store = new RelayStore(state, new AccountStore(state), pino({ level: 'silent' }));
    await store.start();
    const site: Site = { id: 'site_1', tenantId: 't', name: 'web', siteKey: 'sk_1', active: true, allowedOrigins: ['https://a.example'], ...stamp };
    await store.sites.put(site);
    await store.forms.put({ id: 'form_1', tenantId: 't', siteId: 'site_1', formKey: 'contact', name: 'c', active: true, recipients: [], webhooks: [], ...stamp });
    expect(store.siteByKey('sk_1')?.id).toBe('site_1');
    expect(store.formByKey('site_1', 'contact')?.id).toBe('form_1');
    expect(store.allowedOrigins()).toEqual({ any: false, origins: new Set(['https://a.example']) });
    await store.sites.put({ ...site, siteKey: 'sk_2', allowedOrigins: [] });
    expect(store.siteByKey('sk_1')).toBeUndefined();
    expect(store.siteByKey('sk_2')?.id).toBe('site_1');
    expect(store.allowedOrigins().any).toBe(true);
    await store.sites.put({ ...site, active: false });
    expect(store.allowedOrigins()).toEqual({ any: false, origins: new Set() });
    await store.forms.delete('form_1');
    expect(store.formByKey('site_1', 'contact')).toBeUndefined();
    store.shutdown();
  });
});
