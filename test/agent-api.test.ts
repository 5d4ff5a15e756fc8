/**
 * The agent API on a running `sluice serve`: every endpoint's happy path and refusals, what
 * lands in storage, and the OpenAPI document.
 */
import { gzipSync } from 'node:zlib';
import { compress as zstdCompress } from '@mongodb-js/zstd';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { InstallTokens, INSTALL_TOKEN_TTL_MS } from '../gateway/install-tokens.ts';
import type { IssuedKey } from '../gateway/sources.ts';
import { deployMarkerSchema, heartbeatSchema, logBatchSchema, metricBatchSchema } from '../pipeline/agent/schemas.ts';
import { startTestSluice, type TestSluice } from './harness.ts';

let sluice: TestSluice;
/** A second source and its key. */
let other: { id: string; apiKey: string };
const MiB = 1024 * 1024;

beforeAll(async () => {
  sluice = await startTestSluice({ 'limits.rateBurst': 100_000, 'limits.ratePerMinute': 600_000 });
  other = await sluice.sources.createSource('other');
});
afterAll(async () => sluice?.stop());

function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const payload = body instanceof Uint8Array || typeof body === 'string' ? body : JSON.stringify(body);
  return fetch(sluice.baseUrl + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': sluice.apiKey, ...headers },
    body: payload as BodyInit,
  });
}

async function count(sql: string): Promise<number> {
  const [row] = await sluice.rows<{ n: number }>(sql);
  return Number(row!.n);
}

const logEntries = (n: number, tag: string) =>
  Array.from({ length: n }, (_, i) => ({ message: `${tag} ${i}`, level: i % 2 ? 'info' : 'error', timestamp: String(1_795_341_600_000_000_000n + BigInt(i)) }));

describe('POST /api/v1/ingest', () => {
  it('stores a batch of 10,000 entries exactly, with batch defaults and per-entry fields', async () => {
    const response = await post('/api/v1/ingest', { host: 'web-1', service: 'api', attributes: { region: 'eu' }, entries: logEntries(10_000, 'full') });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ accepted: 10_000 });
    expect(await count("SELECT count() AS n FROM otel.agent_logs WHERE startsWith(Message, 'full ')")).toBe(10_000);
    expect(await count("SELECT uniqExact(Message) AS n FROM otel.agent_logs WHERE startsWith(Message, 'full ')")).toBe(10_000);
    const [row] = await sluice.rows<Record<string, unknown>>(
      "SELECT SourceId, Host, Service, Level, SeverityNumber, Attributes, toString(toUnixTimestamp64Nano(Timestamp)) AS ns FROM otel.agent_logs WHERE Message = 'full 1'",
    );
    expect(row).toEqual({ SourceId: sluice.sourceId, Host: 'web-1', Service: 'api', Level: 'info', SeverityNumber: 9, Attributes: { region: 'eu' }, ns: '1795341600000000001' });
  });

  it('refuses 10,001 entries whole, naming the limit, and stores nothing of them', async () => {
    const response = await post('/api/v1/ingest', { entries: logEntries(10_001, 'over') });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: 'bad_request',
      message: 'batch has 10001 entries; the limit is 10000 per request (nothing was stored)',
      statusCode: 400,
    });
    expect(await count("SELECT count() AS n FROM otel.agent_logs WHERE startsWith(Message, 'over ')")).toBe(0);
  });

  it('refuses a batch with one bad entry whole, naming the field and its index', async () => {
    const entries = logEntries(50, 'badfield');
    entries[37] = { ...entries[37]!, timestamp: 'last tuesday' };
    const response = await post('/api/v1/ingest', { entries });
    expect(response.status).toBe(400);
    expect((await response.json()).message).toBe('entries[37].timestamp: must be RFC 3339 or epoch nanoseconds');
    expect(await count("SELECT count() AS n FROM otel.agent_logs WHERE startsWith(Message, 'badfield ')")).toBe(0);
  });

  it('accepts gzip and zstd bodies', async () => {
    const body = Buffer.from(JSON.stringify({ entries: logEntries(10, 'gz') }));
    expect((await post('/api/v1/ingest', gzipSync(body), { 'content-encoding': 'gzip' })).status).toBe(200);
    const zbody = Buffer.from(JSON.stringify({ entries: logEntries(10, 'zs') }));
    expect((await post('/api/v1/ingest', await zstdCompress(zbody, 3), { 'content-encoding': 'zstd' })).status).toBe(200);
    expect(await count("SELECT count() AS n FROM otel.agent_logs WHERE startsWith(Message, 'gz ') OR startsWith(Message, 'zs ')")).toBe(20);
  });

  it('refuses bad encodings: corrupt gzip, unknown encoding, wrong content type, invalid UTF-8, bombs', async () => {
    const body = Buffer.from(JSON.stringify({ entries: logEntries(5, 'enc') }));
    const corrupt = await post('/api/v1/ingest', gzipSync(body).subarray(0, 20), { 'content-encoding': 'gzip' });
    expect(corrupt.status).toBe(400);
    expect((await corrupt.json()).error).toBe('bad_request');
    expect((await post('/api/v1/ingest', body, { 'content-encoding': 'br' })).status).toBe(415);
    expect((await post('/api/v1/ingest', body, { 'content-type': 'text/plain' })).status).toBe(415);
    const invalidUtf8 = Buffer.concat([Buffer.from('{"entries":[{"message":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}]}')]);
    const utf8Response = await post('/api/v1/ingest', invalidUtf8);
    expect(utf8Response.status).toBe(400);
    expect((await utf8Response.json()).message).toBe('body is not valid UTF-8');
    const bomb = gzipSync(Buffer.alloc(64 * MiB, 0x20), { level: 9 });
    expect((await post('/api/v1/ingest', bomb, { 'content-encoding': 'gzip' })).status).toBe(413);
    expect((await post('/api/v1/ingest', Buffer.alloc(10 * MiB + 1, 0x20))).status).toBe(413);
    expect((await post('/api/v1/ingest', '{"entries": [')).status).toBe(400);
    expect(await count("SELECT count() AS n FROM otel.agent_logs WHERE startsWith(Message, 'enc ')")).toBe(0);
  });

  it('refuses a missing or bad key with 401, and writes a key into its own source only', async () => {
    const noKey = await fetch(sluice.baseUrl + '/api/v1/ingest', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"entries":[]}' });
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toMatchObject({ error: 'unauthorized', statusCode: 401 });
    expect((await post('/api/v1/ingest', { entries: [] }, { 'x-api-key': 'slk_wrong' })).status).toBe(401);
    expect((await post('/api/v1/ingest', { entries: [{ message: 'mine' }] }, { 'x-api-key': '', authorization: `Bearer ${other.apiKey}` })).status).toBe(200);
    expect(await count(`SELECT count() AS n FROM otel.agent_logs WHERE Message = 'mine' AND SourceId = '${other.id}'`)).toBe(1);
    expect(await count("SELECT count() AS n FROM otel.agent_logs WHERE Message = 'mine'")).toBe(1);
  });

  it('answers 405 with Allow for the wrong method', async () => {
    const response = await fetch(sluice.baseUrl + '/api/v1/ingest', { headers: { 'x-api-key': sluice.apiKey } });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('POST');
  });
});

describe('POST /api/v1/metrics/ingest', () => {
  it('stores gauges and counters', async () => {
    const response = await post('/api/v1/metrics/ingest', {
      host: 'web-1',
      metrics: [
        { name: 'system.cpu.utilization', value: 0.25, unit: '1' },
        { name: 'http.requests', value: 1200, type: 'counter', attributes: { route: '/a' }, timestamp: '2026-11-22T10:00:00Z' },
      ],
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ accepted: 2 });
    const rows = await sluice.rows("SELECT MetricName, MetricType, Unit, Value, Host, Attributes FROM otel.agent_metrics ORDER BY MetricName");
    expect(rows).toEqual([
      { MetricName: 'http.requests', MetricType: 'counter', Unit: '', Value: 1200, Host: 'web-1', Attributes: { route: '/a' } },
      { MetricName: 'system.cpu.utilization', MetricType: 'gauge', Unit: '1', Value: 0.25, Host: 'web-1', Attributes: {} },
    ]);
  });

  it('refuses a bad point whole, naming it', async () => {
    const response = await post('/api/v1/metrics/ingest', { metrics: [{ name: 'ok', value: 1 }, { name: '9bad', value: 1 }] });
    expect(response.status).toBe(400);
    expect((await response.json()).message).toContain('metrics[1].name: must match');
    expect((await post('/api/v1/metrics/ingest', { metrics: [] }, { 'x-api-key': '' })).status).toBe(401);
  });
});

describe('POST /api/v1/heartbeat', () => {
  it('keeps the latest state of each agent, queryable, and tells the config ETag', async () => {
    const beat = (version: string, status: string) =>
      post('/api/v1/heartbeat', { agentId: 'agent-7', version, host: 'web-1', os: 'linux', arch: 'amd64', status, startedAt: '2026-11-22T09:00:00Z', attributes: { pid: 42 } });
    const first = await beat('1.0.0', 'ok');
    expect(first.status).toBe(200);
    const answer = await first.json();
    expect(answer).toEqual({ accepted: 1, configEtag: sluice.configs.current(sluice.sourceId).etag });
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await beat('1.1.0', 'degraded')).status).toBe(200);
    // A ReplacingMergeTree on LastSeen: one row per agent once merged (or read with FINAL), the latest.
    const agents = await sluice.rows(`SELECT AgentId, Version, Status, Host FROM otel.agent_heartbeats FINAL WHERE SourceId = '${sluice.sourceId}'`);
    expect(agents).toEqual([{ AgentId: 'agent-7', Version: '1.1.0', Status: 'degraded', Host: 'web-1' }]);
    expect((await post('/api/v1/heartbeat', { version: '1' })).status).toBe(400);
  });
});

describe('POST /api/v1/webhooks/deploy', () => {
  it('records a marker, queryable by time range', async () => {
    const response = await post('/api/v1/webhooks/deploy', {
      service: 'checkout',
      version: '2.4.0',
      environment: 'production',
      commit: '9f1c2e7',
      deployedBy: 'github-actions',
      url: 'https://ci.example.com/runs/1',
      timestamp: '2026-11-22T08:30:00Z',
    });
    expect(response.status).toBe(200);
    const inRange = await sluice.rows(
      "SELECT Service, Version, Environment, Commit, DeployedBy, Url FROM otel.deploy_markers WHERE Timestamp BETWEEN '2026-11-22 08:00:00' AND '2026-11-22 09:00:00'",
    );
    expect(inRange).toEqual([{ Service: 'checkout', Version: '2.4.0', Environment: 'production', Commit: '9f1c2e7', DeployedBy: 'github-actions', Url: 'https://ci.example.com/runs/1' }]);
    const bad = await post('/api/v1/webhooks/deploy', { service: 'checkout' });
    expect(bad.status).toBe(400);
    expect((await bad.json()).message).toBe('version: is required');
  });
});

describe('GET /api/v1/agent/config', () => {
  const get = (apiKey: string, query = '', headers: Record<string, string> = {}) =>
    fetch(`${sluice.baseUrl}/api/v1/agent/config${query}`, { headers: { 'x-api-key': apiKey, ...headers } });

  it('serves the key\'s own source config with an ETag, 304 when unchanged, and the new one after a change', async () => {
    await sluice.configs.set(sluice.sourceId, { logLevel: 'debug' });
    await sluice.configs.set(other.id, { logLevel: 'error' });
    const first = await get(sluice.apiKey);
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({ sourceId: sluice.sourceId, version: 1, config: { logLevel: 'debug' } });
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    const unchanged = await get(sluice.apiKey, '', { 'if-none-match': etag });
    expect(unchanged.status).toBe(304);
    expect(unchanged.headers.get('etag')).toBe(etag);
    await sluice.configs.set(sluice.sourceId, { logLevel: 'info' });
    const changed = await get(sluice.apiKey, '', { 'if-none-match': etag });
    expect(changed.status).toBe(200);
    expect((await changed.json()).config).toEqual({ logLevel: 'info' });
  });

  it('lets the key alone decide the source: parameters naming another source are ignored', async () => {
    for (const query of [`?source=${sluice.sourceId}`, `?sourceId=${sluice.sourceId}`, `?source_id=${sluice.sourceId}`]) {
      const response = await get(other.apiKey, query, { 'x-source-id': sluice.sourceId });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ sourceId: other.id, config: { logLevel: 'error' } });
    }
  });

  it('refuses a missing, bad or revoked key', async () => {
    expect((await fetch(`${sluice.baseUrl}/api/v1/agent/config`)).status).toBe(401);
    expect((await get('slk_nope')).status).toBe(401);
    const extra = await sluice.sources.addKey(other.id);
    expect((await get(extra.apiKey)).status).toBe(200);
    await sluice.sources.revokeKey(extra.keyId);
    await expect.poll(async () => (await get(extra.apiKey)).status, { timeout: 1000 }).toBe(401);
  });
});

describe('GET /install/{token}', () => {
  it('renders a Kubernetes manifest, a collector config and env variables with a working ingestion key', async () => {
    const issued = await sluice.installTokens.create(other.id);
    const response = await fetch(`${sluice.baseUrl}/install/${issued.token}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('application/yaml');
    expect(response.headers.get('cache-control')).toBe('no-store');
    const documents = parseAllDocuments(await response.text()).map((doc) => doc.toJS());
    expect(documents.map((doc) => doc.kind)).toEqual(['Namespace', 'Secret', 'ConfigMap', 'DaemonSet']);
    const apiKey = documents[1].stringData['api-key'];
    expect(sluice.sources.authenticate(apiKey)).toBe(other.id);
    const collector = parseAllDocuments(documents[2].data['config.yaml'])[0]!.toJS();
    expect(collector.exporters.otlp_http).toEqual({ endpoint: sluice.baseUrl.replace('127.0.0.1', 'localhost'), compression: 'gzip', headers: { 'X-API-Key': '${env:SLUICE_API_KEY}' } });
    expect(documents[3].spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef).toEqual({ name: 'sluice-agent', key: 'api-key' });

    const plain = parseAllDocuments(await (await fetch(`${sluice.baseUrl}/install/${issued.token}?format=otelcol`)).text())[0]!.toJS();
    expect(plain.exporters.otlp_http.headers['X-API-Key']).toBe(apiKey);
    const env = await (await fetch(`${sluice.baseUrl}/install/${issued.token}?format=env`)).text();
    expect(env).toContain(`SLUICE_API_KEY=${apiKey}\n`);

    // The key the manifest carries ingests, into its own source.
    expect((await post('/api/v1/ingest', { entries: [{ message: 'installed' }] }, { 'x-api-key': apiKey })).status).toBe(200);
    expect(await count(`SELECT count() AS n FROM otel.agent_logs WHERE Message = 'installed' AND SourceId = '${other.id}'`)).toBe(1);
  });

  it('answers expired and unknown tokens with the same 404', async () => {
    const expired = await new InstallTokens(sluice.state, sluice.sources, () => Date.now() - INSTALL_TOKEN_TTL_MS - 1000).create(other.id);
    const responses = await Promise.all(
      [expired.token, `sit_${'x'.repeat(43)}`, 'garbage', '%E0%A4%A'].map((token) => fetch(`${sluice.baseUrl}/install/${token}`)),
    );
    const bodies = await Promise.all(responses.map((r) => r.text()));
    expect(responses.map((r) => r.status)).toEqual([404, 404, 404, 404]);
    expect(new Set(bodies).size).toBe(1);
  });

  it("leaves an expired token's key working only if its manifest was served", async () => {
    // The key an unused token carries never leaves the store: caught here as it is minted.
    const addKey = vi.spyOn(sluice.sources, 'addKey');
    try {
      // Made a day ago (the tokens' clock): it expired without its manifest ever being served.
      await new InstallTokens(sluice.state, sluice.sources, () => Date.now() - INSTALL_TOKEN_TTL_MS - 1000).create(other.id);
      const unusedKey = (await (addKey.mock.results[0]!.value as Promise<IssuedKey>)).apiKey;
      expect((await post('/api/v1/ingest', { entries: [{ message: 'never installed' }] }, { 'x-api-key': unusedKey })).status).toBe(401);
    } finally {
      addKey.mockRestore();
    }
    const used = await sluice.installTokens.create(other.id);
    const usedKey = parseAllDocuments(await (await fetch(`${sluice.baseUrl}/install/${used.token}`)).text())[1]!.toJS().stringData['api-key'];
    expect((await post('/api/v1/ingest', { entries: [{ message: 'installed by a used token' }] }, { 'x-api-key': usedKey })).status).toBe(200);
  });

  it('refuses an unknown format', async () => {
    const issued = await sluice.installTokens.create(other.id);
    const response = await fetch(`${sluice.baseUrl}/install/${issued.token}?format=helm`);
    expect(response.status).toBe(400);
    expect((await response.json()).message).toBe('format must be one of kubernetes, otelcol, env');
  });
});

describe('GET /api/v1/openapi.json', () => {
  it('describes every ingest path with the schemas that validate requests', async () => {
    const response = await fetch(`${sluice.baseUrl}/api/v1/openapi.json`);
    expect(response.status).toBe(200);
    const doc = await response.json();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual(
      ['/api/v1/agent/config', '/api/v1/docs', '/api/v1/docs/assets/{file}', '/api/v1/health', '/api/v1/heartbeat', '/api/v1/ingest', '/api/v1/metrics/ingest', '/api/v1/openapi.json',
        '/api/v1/webhooks/deploy', '/install/{token}', '/v1/logs', '/v1/metrics', '/v1/traces'],
    );
    const { $id: _a, ...logBatch } = logBatchSchema;
    const { $id: _b, ...metricBatch } = metricBatchSchema;
    const { $id: _c, ...heartbeat } = heartbeatSchema;
    const { $id: _d, ...deploy } = deployMarkerSchema;
    expect(doc.components.schemas.AgentLogBatch).toEqual(JSON.parse(JSON.stringify(logBatch)));
    expect(doc.components.schemas.AgentMetricBatch).toEqual(JSON.parse(JSON.stringify(metricBatch)));
    expect(doc.components.schemas.AgentHeartbeat).toEqual(JSON.parse(JSON.stringify(heartbeat)));
    expect(doc.components.schemas.DeployMarker).toEqual(JSON.parse(JSON.stringify(deploy)));
    // Every $ref resolves.
    for (const [, name] of JSON.stringify(doc).matchAll(/"#\/components\/schemas\/(\w+)"/g)) expect(doc.components.schemas[name!], name).toBeDefined();
  });
});
