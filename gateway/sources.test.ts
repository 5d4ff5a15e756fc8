import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalStateStore } from '../state/local.ts';
import { SourceRegistry } from './sources.ts';

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
