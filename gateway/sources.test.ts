import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalStateStore } from '../state/local.ts';
import { CapReachedError, MAX_KEYS_PER_SOURCE, MAX_SOURCES_PER_TENANT, SourceRegistry } from './sources.ts';

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function registry() {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-sources-'));
  dirs.push(dir);
  const store = new LocalStateStore(dir);
  await store.start();
  const sources = new SourceRegistry(store);
  await sources.start();
  return { dir, store, sources };
}

describe('SourceRegistry', () => {
  it("keeps each tenant's sources apart; a source without a tenant belongs to the default one", async () => {
    const { sources } = await registry();
    const acme = await sources.createSource('web', 'ten_acme');
    const other = await sources.createSource('web', 'ten_other');
    const unnamed = await sources.createSource('batch');
    expect(unnamed.tenantId).toBe('ten_default');
    expect((await sources.listSources('ten_acme')).map((s) => s.id)).toEqual([acme.id]);
    expect(await sources.sourceIdsOf('ten_other')).toEqual([other.id]);
    expect((await sources.listSources()).length).toBe(3);
  });

  it('moves sources made before tenants to the given tenant, once (the migration)', async () => {
    const { store, sources } = await registry();
    await store.put('sources', 'old-1', { id: 'old-1', name: 'legacy', createdAt: '2026-01-01T00:00:00Z' });
    const current = await sources.createSource('web', 'ten_acme');
    // Before the migration an untenanted source is no one's: not listed, not found.
    expect(await sources.listSources()).toHaveLength(1);
    expect(await sources.getSource('old-1')).toBeUndefined();
    expect(await sources.hasUntenanted()).toBe(true);
    expect(await sources.moveUntenanted('ten_default')).toBe(1);
    expect(await sources.hasUntenanted()).toBe(false);
    expect(await sources.moveUntenanted('ten_other')).toBe(0);
    expect(await sources.getSource('old-1')).toMatchObject({ name: 'legacy', tenantId: 'ten_default' });
    expect(await sources.getSource(current.id)).toMatchObject({ tenantId: 'ten_acme' });
  });

  it('creates a source whose key authenticates into that source only', async () => {
    const { sources } = await registry();
    const a = await sources.createSource('web');
    const b = await sources.createSource('batch');
    expect(a.apiKey).toMatch(/^slk_[A-Za-z0-9_-]{43}$/);
    expect(sources.authenticate(a.apiKey)).toBe(a.id);
    expect(sources.authenticate(b.apiKey)).toBe(b.id);
    expect(sources.authenticate('slk_' + 'x'.repeat(43))).toBeUndefined();
    expect(sources.authenticate('')).toBeUndefined();
  });

  it('stores only hashes of keys', async () => {
    const { dir, sources } = await registry();
    const { apiKey } = await sources.createSource('web');
    for (const file of await readdir(dir)) expect(await readFile(join(dir, file), 'utf8')).not.toContain(apiKey);
    expect(JSON.stringify(await sources.listSources())).not.toContain(apiKey.slice(4));
  });

  it('adds keys and revokes them by id or by value', async () => {
    const { sources } = await registry();
    const source = await sources.createSource('web');
    const second = await sources.addKey(source.id);
    expect(sources.authenticate(second.apiKey)).toBe(source.id);
    await sources.revokeKey(second.keyId);
    expect(sources.authenticate(second.apiKey)).toBeUndefined();
    expect(sources.authenticate(source.apiKey)).toBe(source.id);
    await sources.revokeKey(source.apiKey);
    expect(sources.authenticate(source.apiKey)).toBeUndefined();
    const [listed] = await sources.listSources();
    expect(listed!.keys.every((k) => k.revokedAt)).toBe(true);
  });

  it('sees revocations made through another registry on the same store', async () => {
    const { store, sources } = await registry();
    const other = new SourceRegistry(store);
    await other.start();
    const source = await sources.createSource('web');
    expect(other.authenticate(source.apiKey)).toBe(source.id);
    await sources.revokeKey(source.keyId);
    expect(other.authenticate(source.apiKey)).toBeUndefined();
  });

  it('refuses keys for unknown sources', async () => {
    const { sources } = await registry();
    await expect(sources.addKey('nope')).rejects.toThrow(/no source/);
    await expect(sources.revokeKey('key_nope')).rejects.toThrow(/no such API key/);
  });
});

describe('SourceRegistry caps', () => {
  /** Active keys of a source as the store holds them. */
  const activeKeys = async (sources: SourceRegistry, sourceId: string) =>
    (await sources.listSources()).find((s) => s.id === sourceId)!.keys.filter((k) => !k.revokedAt);

  it('refuses a key past the cap with a 409 saying to revoke one; a revoked key frees its place', async () => {
    const { sources } = await registry();
    const source = await sources.createSource('web');
    for (let i = 1; i < MAX_KEYS_PER_SOURCE; i++) await sources.addKey(source.id);
    const refused = await sources.addKey(source.id).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(CapReachedError);
    expect(refused).toMatchObject({ statusCode: 409, message: expect.stringMatching(/at most 20 active API keys.*revoke one first/) });
    expect(await activeKeys(sources, source.id)).toHaveLength(MAX_KEYS_PER_SOURCE);

    await sources.revokeKey(source.keyId);
    const another = await sources.addKey(source.id);
    expect(sources.authenticate(another.apiKey)).toBe(source.id);
    await expect(sources.addKey(source.id)).rejects.toThrow(CapReachedError);
  });

  it('lets a full source rotate a key: the new one is issued before the old one is revoked', async () => {
    const { sources } = await registry();
    const source = await sources.createSource('web');
    for (let i = 1; i < MAX_KEYS_PER_SOURCE; i++) await sources.addKey(source.id);
    const rotated = await sources.addKey(source.id, { replacing: source.keyId });
    await sources.revokeKey(source.keyId);
    expect(sources.authenticate(rotated.apiKey)).toBe(source.id);
    expect(await activeKeys(sources, source.id)).toHaveLength(MAX_KEYS_PER_SOURCE);
  });

  it('holds the key cap when gateways on one store create keys at once', async () => {
    const { store, sources } = await registry();
    const gateways = [sources, new SourceRegistry(store), new SourceRegistry(store)];
    const source = await sources.createSource('web');
    const results = await Promise.allSettled(Array.from({ length: 2 * MAX_KEYS_PER_SOURCE }, (_, i) => gateways[i % 3]!.addKey(source.id)));
    const issued = results.filter((r) => r.status === 'fulfilled');
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
    expect(issued).toHaveLength(MAX_KEYS_PER_SOURCE - 1);
    expect(refused.every((err) => err instanceof CapReachedError)).toBe(true);
    expect(await activeKeys(sources, source.id)).toHaveLength(MAX_KEYS_PER_SOURCE);
  });

  it('counts the keys a source had before the cap existed', async () => {
    const { store, sources } = await registry();
    // A source and keys written as an older version did, with no cap: more keys than the cap.
    const source = { id: 'src-legacy', name: 'legacy', tenantId: 'ten_default', createdAt: '2026-01-01T00:00:00Z' };
    await store.put('sources', source.id, source);
    const legacy = Array.from({ length: MAX_KEYS_PER_SOURCE + 2 }, (_, i) => `key_legacy${i}`);
    for (const id of legacy) await store.put('api_keys', id, { id, sourceId: source.id, hash: `h${id}`, createdAt: '2026-01-01T00:00:00Z' });
    await expect(sources.addKey(source.id)).rejects.toThrow(CapReachedError);
    for (const id of legacy.slice(0, 3)) await sources.revokeKey(id);
    await sources.addKey(source.id);
    await expect(sources.addKey(source.id)).rejects.toThrow(CapReachedError);
  });

  it("holds the tenant's source cap when sources are created at once; other tenants are not counted", async () => {
    const { store, sources } = await registry();
    const gateways = [sources, new SourceRegistry(store)];
    const results = await Promise.allSettled(Array.from({ length: MAX_SOURCES_PER_TENANT + 10 }, (_, i) => gateways[i % 2]!.createSource(`s${i}`, 'ten_acme')));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(MAX_SOURCES_PER_TENANT);
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
    expect(refused).toHaveLength(10);
    expect(refused[0]).toMatchObject({ statusCode: 409, message: expect.stringMatching(/at most 100 sources/) });
    expect(await sources.listSources('ten_acme')).toHaveLength(MAX_SOURCES_PER_TENANT);
    expect((await sources.createSource('web', 'ten_other')).tenantId).toBe('ten_other');
  });
});
