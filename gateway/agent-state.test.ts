/** Install tokens and pushed agent configs over the embedded state store. */
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { LocalStateStore } from '../state/local.ts';
import type { StateStore } from '../state/store.ts';
import { AgentConfigs, etagMatches } from './agent-configs.ts';
import { INSTALL_TOKEN_TTL_MS, InstallTokens, MAX_INSTALL_TOKENS_PER_SOURCE } from './install-tokens.ts';
import { CapReachedError, type IssuedKey, SourceRegistry } from './sources.ts';

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function setup() {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-agent-state-'));
  dirs.push(dir);
  // One clock for the store, the keys and the tokens: expiry is decided by each of them.
  let now = Date.parse('2026-11-22T12:00:00Z');
  const clock = () => now;
  const store = new LocalStateStore(dir, clock);
  await store.start();
  const sources = new SourceRegistry(store, undefined, clock);
  await sources.start();
  const tokens = new InstallTokens(store, sources, clock);
  const advance = (ms: number) => { now += ms; };
  return { dir, store, sources, tokens, advance, clock };
}

async function filesUnder(dir: string): Promise<string> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const texts = await Promise.all(entries.filter((e) => e.isFile()).map((e) => readFile(join(e.parentPath, e.name), 'utf8')));
  return texts.join('\n');
}

describe('InstallTokens', () => {
  it('grants a working ingestion key of its source, which the store never holds in plaintext', async () => {
    const { dir, sources, tokens } = await setup();
    const source = await sources.createSource('web');
    const issued = await tokens.create(source.id);
    expect(issued.token).toMatch(/^sit_[A-Za-z0-9_-]{43}$/);
    const grant = await tokens.redeem(issued.token);
    expect(grant).toMatchObject({ sourceId: source.id, tokenId: issued.id });
    expect(sources.authenticate(grant!.apiKey)).toBe(source.id);
    const stored = await filesUnder(dir);
    expect(stored).not.toContain(grant!.apiKey);
    expect(stored).not.toContain(issued.token);
    const listed = await sources.listSources();
    expect(listed[0]!.keys.find((k) => k.id === issued.keyId)?.label).toBe(`install token ${issued.id}`);
  });

  it('expires after 24 hours; unknown, malformed and expired tokens are alike', async () => {
    const { sources, tokens, advance } = await setup();
    const source = await sources.createSource('web');
    const { token } = await tokens.create(source.id);
    advance(INSTALL_TOKEN_TTL_MS - 1000);
    expect(await tokens.redeem(token)).toBeDefined();
    advance(1000);
    expect(await tokens.redeem(token)).toBeUndefined();
    expect(await tokens.redeem(`sit_${'A'.repeat(43)}`)).toBeUndefined();
    expect(await tokens.redeem('../../etc/passwd')).toBeUndefined();
    expect(await tokens.redeem(token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A'))).toBeUndefined();
  });

  it('dies with its key: a revoked key makes the token unknown', async () => {
    const { sources, tokens } = await setup();
    const source = await sources.createSource('web');
    const issued = await tokens.create(source.id);
    await sources.revokeKey(issued.keyId);
    expect(await tokens.redeem(issued.token)).toBeUndefined();
  });

  it('is redeemed, and kept, by a gateway whose watch has not brought its key yet; a revoked key still takes it', async () => {
    const { store, sources, tokens, clock } = await setup();
    // Another gateway on the same store, whose watch delivers nothing (it lags behind).
    const lagging = new SourceRegistry(Object.assign(Object.create(store) as StateStore, { watch: () => () => {} }), undefined, clock);
    await lagging.start();
    const laggingTokens = new InstallTokens(store, lagging, clock);
    const source = await sources.createSource('web');
    const issued = await tokens.create(source.id);
    expect(lagging.keyActive(issued.keyId)).toBe(false);

    const grant = await laggingTokens.redeem(issued.token);
    expect(grant).toMatchObject({ sourceId: source.id, tokenId: issued.id });
    expect(sources.authenticate(grant!.apiKey)).toBe(source.id);
    expect(await store.list('install_tokens')).toHaveLength(1);
    expect(await tokens.redeem(issued.token)).toBeDefined();

    await sources.revokeKey(issued.keyId);
    expect(await laggingTokens.redeem(issued.token)).toBeUndefined();
    expect(await store.list('install_tokens')).toEqual([]);
  });

  it('is refused for an unknown source', async () => {
    const { tokens } = await setup();
    await expect(tokens.create('no-such-source')).rejects.toThrow('no source no-such-source');
  });

  it("revokes an unused token's key when the token expires; a used token's key keeps working", async () => {
    const { store, sources, tokens, advance } = await setup();
    const source = await sources.createSource('web');
    // The keys the tokens carry, as they were minted (an unused token's key never leaves the store otherwise).
    const minted: Array<Promise<IssuedKey>> = [];
    const addKey = sources.addKey.bind(sources);
    vi.spyOn(sources, 'addKey').mockImplementation((...args) => {
      const issued = addKey(...args);
      minted.push(issued);
      return issued;
    });
    const used = await tokens.create(source.id);
    const unused = await tokens.create(source.id);
    const [usedKey, unusedKey] = await Promise.all(minted);
    advance(INSTALL_TOKEN_TTL_MS - 1000);
    expect((await tokens.redeem(used.token))?.apiKey).toBe(usedKey!.apiKey);

    advance(1000);
    expect(sources.authenticate(unusedKey!.apiKey)).toBeUndefined();
    expect(sources.keyActive(unused.keyId)).toBe(false);
    expect(sources.authenticate(usedKey!.apiKey)).toBe(source.id);
    // Lists show the unused token's key revoked when the token expired; the token records are gone.
    const keys = (await sources.listSources())[0]!.keys;
    expect(keys.find((k) => k.id === unused.keyId)?.revokedAt).toBe(unused.expiresAt);
    expect(keys.find((k) => k.id === used.keyId)?.revokedAt).toBeUndefined();
    expect(await store.list('install_tokens')).toEqual([]);
    // A registry that starts now (another gateway, a restart) agrees.
    const restarted = new SourceRegistry(store, undefined, () => Date.parse(unused.expiresAt) + 1);
    await restarted.start();
    expect(restarted.authenticate(unusedKey!.apiKey)).toBeUndefined();
    expect(restarted.authenticate(usedKey!.apiKey)).toBe(source.id);
  });

  it('refuses a token past the cap with a 409, also when gateways create them at once; expired tokens free their places', async () => {
    const { store, sources, tokens, clock, advance } = await setup();
    const source = await sources.createSource('web');
    const other = new InstallTokens(store, new SourceRegistry(store, undefined, clock), clock);
    const results = await Promise.allSettled(Array.from({ length: MAX_INSTALL_TOKENS_PER_SOURCE + 5 }, (_, i) => (i % 2 ? other : tokens).create(source.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(MAX_INSTALL_TOKENS_PER_SOURCE);
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
    expect(refused).toHaveLength(5);
    expect(refused.every((err) => err instanceof CapReachedError)).toBe(true);
    expect(refused[0]).toMatchObject({ statusCode: 409, message: expect.stringMatching(/at most 10 install tokens/) });
    // Their keys count against the key cap too, until they expire unused.
    expect((await sources.listSources())[0]!.keys.filter((k) => !k.revokedAt)).toHaveLength(MAX_INSTALL_TOKENS_PER_SOURCE + 1);

    advance(INSTALL_TOKEN_TTL_MS);
    await tokens.create(source.id);
    expect((await sources.listSources())[0]!.keys.filter((k) => !k.revokedAt)).toHaveLength(2);
  });
});

describe('AgentConfigs', () => {
  it('serves version 0 and an empty config until one is set, then the new one with a new ETag', async () => {
    const { store } = await setup();
    const configs = new AgentConfigs(store);
    await configs.start();
    const before = configs.current('s1');
    expect(JSON.parse(before.body)).toEqual({ sourceId: 's1', version: 0, updatedAt: null, config: {} });
    await configs.set('s1', { level: 'debug' });
    const after = configs.current('s1');
    expect(JSON.parse(after.body)).toMatchObject({ version: 1, config: { level: 'debug' } });
    expect(after.etag).not.toBe(before.etag);
    expect(configs.current('s2').etag).not.toBe(after.etag); // another source still sees its own (empty) config
    await configs.set('s1', { level: 'info' });
    expect(JSON.parse(configs.current('s1').body).version).toBe(2);
  });

  it('reaches another instance on the same store through its watch', async () => {
    const { store } = await setup();
    const writer = new AgentConfigs(store);
    const reader = new AgentConfigs(store);
    await writer.start();
    await reader.start();
    await writer.set('s1', { sampling: 0.5 });
    await expect.poll(() => JSON.parse(reader.current('s1').body).config, { timeout: 2000 }).toEqual({ sampling: 0.5 });
    expect(reader.current('s1').etag).toBe(writer.current('s1').etag);
  });

  it('refuses what is not a JSON object, or too big', async () => {
    const { store } = await setup();
    const configs = new AgentConfigs(store);
    for (const bad of [[1, 2], 'text', null, 3]) await expect(configs.set('s1', bad)).rejects.toThrow('must be a JSON object');
    await expect(configs.set('s1', { blob: 'x'.repeat(70_000) })).rejects.toThrow('the limit is 65536');
  });

  it('matches If-None-Match lists, weak tags and *', () => {
    expect(etagMatches('"abc"', '"abc"')).toBe(true);
    expect(etagMatches('W/"abc"', '"abc"')).toBe(true);
    expect(etagMatches('"x", "abc"', '"abc"')).toBe(true);
    expect(etagMatches('*', '"abc"')).toBe(true);
    expect(etagMatches('"abd"', '"abc"')).toBe(false);
    expect(etagMatches(undefined, '"abc"')).toBe(false);
  });
});
