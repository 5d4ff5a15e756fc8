/**
 * The `sluice` executable as a user runs it: admin commands with and without a running server
 * on the same data dir, and configuration errors.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { lstat, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

const run = promisify(execFile);
const SLUICE = fileURLToPath(new URL('../bin/sluice.mjs', import.meta.url));

let dataDir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sluice-cli-'));
  env = { ...process.env, SLUICE_DATA_DIR: dataDir, SLUICE_OTLP_HTTP_PORT: '0', SLUICE_OTLP_GRPC_PORT: '0', SLUICE_RELAY_PORT: '0', SLUICE_CONSOLE_PORT: '0', SLUICE_LOG_LEVEL: 'info', SLUICE_WORKERS: '1' };
});
afterAll(async () => rm(dataDir, { recursive: true, force: true }));

const sluice = (args: string[], extraEnv: NodeJS.ProcessEnv = {}) => run(process.execPath, [SLUICE, ...args], { env: { ...env, ...extraEnv } });

// Every step is a `sluice` process of its own (a second or two each, several on a loaded machine):
// a test of a dozen steps gets minutes, not the default minute.
describe('sluice CLI', { timeout: 240_000 }, () => {
  let created: { id: string; name: string; apiKey: string; keyId: string };

  it('creates a source without a running server and prints one JSON object', async () => {
    const { stdout } = await sluice(['sources', 'create', '--name', 'web']);
    created = JSON.parse(stdout);
    expect(created).toMatchObject({ name: 'web', id: expect.any(String), apiKey: expect.stringMatching(/^slk_/) });
  });

  it('prints a summary for a person at a terminal: which port takes which protocol, what to do next, logs as text', async () => {
    // `script` gives the server a pseudo-terminal as stdout, as a shell in a terminal does.
    const terminalDir = await mkdtemp(join(tmpdir(), 'sluice-cli-tty-'));
    const server = spawn('script', ['-qefc', `${process.execPath} ${SLUICE} serve`, '/dev/null'], { env: { ...env, SLUICE_DATA_DIR: terminalDir }, stdio: ['pipe', 'pipe', 'pipe'] });
    let screen = '';
    server.stdout!.on('data', (chunk: Buffer) => (screen += chunk.toString()));
    try {
      await eventually(() => screen.includes('Logs follow.'), 60_000, 100);
      expect(screen).toMatch(/OTLP\/HTTP\s+http:\/\/127\.0\.0\.1:\d+\s+OTEL_EXPORTER_OTLP_ENDPOINT/);
      expect(screen).toMatch(/OTLP\/gRPC\s+http:\/\/127\.0\.0\.1:\d+\s+.*OTEL_EXPORTER_OTLP_PROTOCOL=grpc/);
      expect(screen).toContain('npx sluice demo');
      // Log lines as text, not JSON.
      expect(screen).toMatch(/\d\d:\d\d:\d\d INFO  sluice is serving/);
      expect(screen).not.toContain('{"level"');
    } finally {
      server.kill('SIGTERM');
      await new Promise((resolve) => server.once('exit', resolve));
      await rm(terminalDir, { recursive: true, force: true });
    }
  });

  it('reports every configuration problem and exits non-zero', async () => {
    const error = await sluice(['sources', 'list'], { SLUICE_OTLP_HTTP_PORT: 'http', SLUICE_LOG_LEVEL: 'chatty' }).catch((err) => err);
    expect(error.code).toBe(1);
    expect(error.stderr).toContain('http.port (SLUICE_OTLP_HTTP_PORT): must be integer');
    expect(error.stderr).toContain('logLevel (SLUICE_LOG_LEVEL)');
  });

  it('names the setting of a port that is taken', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as { port: number };
    const otherDir = await mkdtemp(join(tmpdir(), 'sluice-cli-port-'));
    try {
      const error = await sluice(['serve'], { SLUICE_DATA_DIR: otherDir, SLUICE_RELAY_PORT: String(port) }).catch((err) => err);
      expect(error.code).toBe(1);
      expect(error.stderr).toContain(`relay port (SLUICE_RELAY_PORT): cannot listen on 127.0.0.1:${port}`);
    } finally {
      taken.close();
      await rm(otherDir, { recursive: true, force: true });
    }
  });

  it('explains usage errors', async () => {
    const error = await sluice(['sources', 'create']).catch((err) => err);
    expect(error.code).toBe(2);
    expect(error.stderr).toContain('missing --name');
  });

  describe('while `sluice serve` runs on the same data dir', () => {
    let server: ChildProcess;
    let httpPort = 0;
    const logs: string[] = [];

    beforeAll(async () => {
      server = spawn(process.execPath, [SLUICE, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      server.stdout!.on('data', (chunk: Buffer) => logs.push(...chunk.toString().split('\n').filter(Boolean)));
      server.stderr!.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
      const serving = await eventually(() => logs.map((l) => { try { return JSON.parse(l); } catch { return {}; } }).find((l) => l.msg === 'sluice is serving'), 60_000);
      httpPort = serving.httpPort;
    });
    afterAll(async () => {
      server.kill('SIGTERM');
      await new Promise((resolve) => server.once('exit', resolve));
    });

    it('keeps everything it wrote in the data dir private, whatever the shell umask', async () => {
      // This test process runs with the usual umask (022); `sluice` sets its own.
      const open: string[] = [];
      for (const entry of await readdir(dataDir, { recursive: true, withFileTypes: true })) {
        if (entry.isSymbolicLink()) continue; // chDB's links; a link's own mode means nothing
        const path = join(entry.parentPath, entry.name);
        const mode = (await lstat(path)).mode & 0o777;
        if (mode & 0o077) open.push(`${path.slice(dataDir.length + 1)} ${mode.toString(8)}`);
      }
      expect(open).toEqual([]);
    });

    it('creates sources, lists them and queries storage through the control socket', async () => {
      const second = JSON.parse((await sluice(['sources', 'create', '--name', 'batch'])).stdout);
      const ingest = await fetch(`http://127.0.0.1:${httpPort}/v1/traces`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-protobuf', 'x-api-key': second.apiKey },
        body: encodeTraces(traceRequest({ spans: 3, name: 'from-cli-test' })),
      });
      expect(ingest.status).toBe(200);
      const { stdout } = await sluice(['query', "SELECT SourceId, count() AS n FROM otel.otel_traces WHERE SpanName = 'from-cli-test' GROUP BY SourceId"]);
      expect(stdout.trim().split('\n').map((l) => JSON.parse(l))).toEqual([{ SourceId: second.id, n: 3 }]);
      const list = JSON.parse((await sluice(['sources', 'list'])).stdout);
      expect(list.map((s: { name: string }) => s.name)).toEqual(['web', 'batch']);
      expect(JSON.stringify(list)).not.toContain(second.apiKey);
      // Without --tenant a source is the default tenant's; an unknown tenant is refused.
      expect(second.tenantId).toBe('ten_default');
      expect(JSON.parse((await sluice(['sources', 'list', '--tenant', 'ten_default'])).stdout)).toHaveLength(2);
      expect(JSON.parse((await sluice(['sources', 'list', '--tenant', 'ten_other'])).stdout)).toEqual([]);
      const unknown = await sluice(['sources', 'create', '--name', 'x', '--tenant', 'ten_nope']).catch((err) => err);
      expect(unknown.stderr).toContain('no tenant ten_nope');
    });

    it('migrates through the control socket (the server holds the data dir and its chDB)', async () => {
      const report = JSON.parse((await sluice(['migrate'])).stdout);
      expect(report).toEqual({ applied: [], current: expect.any(Number) });
      expect(report.current).toBeGreaterThan(0);
    });

    it('refuses writes through `sluice query`', async () => {
      const error = await sluice(['query', 'DROP TABLE otel.otel_traces']).catch((err) => err);
      expect(error.code).toBe(1);
      expect(error.stderr).toContain('read-only');
    });

    it('revokes a key: the running server refuses it', async () => {
      const send = () =>
        fetch(`http://127.0.0.1:${httpPort}/v1/traces`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-protobuf', 'x-api-key': created.apiKey },
          body: encodeTraces(traceRequest({ spans: 1 })),
        });
      expect((await send()).status).toBe(200);
      await sluice(['sources', 'revoke-key', '--key', created.keyId]);
      const started = Date.now();
      let status = 0;
      while (status !== 401 && Date.now() - started < 10_000) status = (await send()).status;
      expect(status).toBe(401);
      const added = JSON.parse((await sluice(['sources', 'add-key', '--source', created.id])).stdout);
      expect(added.apiKey).toMatch(/^slk_/);
    });

    it('pushes an agent config, issues an install token, lists deploy markers and agents', async () => {
      const base = `http://127.0.0.1:${httpPort}`;
      const source = JSON.parse((await sluice(['sources', 'create', '--name', 'fleet'])).stdout);
      const file = join(dataDir, 'agent-config.json');
      await writeFile(file, JSON.stringify({ logLevel: 'debug', paths: ['/var/log/app.log'] }));
      const set = JSON.parse((await sluice(['agent-config', 'set', '--source', source.id, '--file', file])).stdout);
      expect(set).toMatchObject({ sourceId: source.id, version: 1, config: { logLevel: 'debug' } });
      const served = await fetch(`${base}/api/v1/agent/config`, { headers: { 'x-api-key': source.apiKey } });
      expect((await served.json()).config).toEqual({ logLevel: 'debug', paths: ['/var/log/app.log'] });
      expect(JSON.parse((await sluice(['agent-config', 'get', '--source', source.id])).stdout).version).toBe(1);
      await writeFile(file, '[1, 2]');
      const notObject = await sluice(['agent-config', 'set', '--source', source.id, '--file', file]).catch((err) => err);
      expect(notObject.stderr).toContain('must be a JSON object');

      const token = JSON.parse((await sluice(['install-tokens', 'create', '--source', source.id])).stdout);
      expect(token.url).toBe(`http://localhost:${httpPort}/install/${token.token}`);
      expect((await fetch(`${base}/install/${token.token}?format=env`)).status).toBe(200);
      const unknown = await sluice(['install-tokens', 'create', '--source', 'nope']).catch((err) => err);
      expect(unknown.stderr).toContain('no source nope');

      const post = (path: string, body: unknown) =>
        fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': source.apiKey }, body: JSON.stringify(body) });
      expect((await post('/api/v1/webhooks/deploy', { service: 'api', version: '1.0', timestamp: '2026-11-20T10:00:00Z' })).status).toBe(200);
      expect((await post('/api/v1/webhooks/deploy', { service: 'api', version: '1.1', environment: 'prod' })).status).toBe(200);
      expect((await post('/api/v1/heartbeat', { agentId: 'a-1', version: '0.9', host: 'h1' })).status).toBe(200);
      const recent = JSON.parse((await sluice(['deploys', 'list', '--source', source.id, '--since', '1h'])).stdout);
      expect(recent.map((d: { version: string }) => d.version)).toEqual(['1.1']);
      const all = JSON.parse((await sluice(['deploys', 'list', '--source', source.id, '--since', '2026-11-01T00:00:00Z'])).stdout);
      expect(all.map((d: { version: string }) => d.version)).toEqual(['1.1', '1.0']);
      expect(all[1].timestamp).toBe('2026-11-20T10:00:00.000000000Z');
      const window = JSON.parse((await sluice(['deploys', 'list', '--since', '2026-11-20T09:00:00Z', '--until', '2026-11-20T11:00:00Z'])).stdout);
      expect(window.map((d: { version: string }) => d.version)).toEqual(['1.0']);
      const agents = JSON.parse((await sluice(['agents', 'list', '--source', source.id])).stdout);
      expect(agents).toEqual([expect.objectContaining({ agentId: 'a-1', version: '0.9', host: 'h1', sourceId: source.id, startedAt: null })]);
      const badTime = await sluice(['deploys', 'list', '--since', 'last week']).catch((err) => err);
      expect(badTime.code).toBe(2);
    });

    it('scripts a relay tenant, site, form, recipients, webhook and API key', async () => {
      const relay = async (...args: string[]) => JSON.parse((await sluice(['relay', ...args])).stdout);
      const onboarded = await relay('onboard', '--tenant', 'Acme', '--owner', 'owner@acme.test');
      expect(onboarded).toMatchObject({ tenant: { name: 'Acme' }, owner: { email: 'owner@acme.test', role: 'owner' }, oneTimePassword: expect.any(String) });
      const tenant = onboarded.tenant.id;
      const site = await relay('sites', 'create', '--tenant', tenant, '--name', 'Marketing', '--origin', 'https://www.acme.test', '--origin', 'https://acme.test');
      expect(site.allowedOrigins).toEqual(['https://www.acme.test', 'https://acme.test']);
      const secretFile = join(dataDir, 'captcha-secret');
      await writeFile(secretFile, 'cli-captcha-secret\n');
      const withCaptcha = await relay('captcha', 'set', '--site', site.id, '--provider', 'turnstile', '--site-key', '0x4AAA', '--secret-file', secretFile);
      expect(withCaptcha.captcha).toEqual({ provider: 'turnstile', siteKey: '0x4AAA', secretConfigured: true });
      const form = await relay('forms', 'create', '--site', site.id, '--name', 'Contact', '--key', 'contact');
      await relay('recipients', 'add', '--site', site.id, '--form', form.id, '--channel', 'email', '--address', 'sales@acme.test');
      await relay('recipients', 'add', '--site', site.id, '--form', form.id, '--channel', 'whatsapp', '--address', '+4915112345678');
      const webhook = await relay('webhooks', 'add', '--site', site.id, '--form', form.id, '--url', 'https://hooks.acme.test/forms');
      expect(webhook.secret).toMatch(/^whsec_/);
      const key = await relay('api-keys', 'create', '--site', site.id, '--name', 'backend');
      expect(key.apiKey).toMatch(/^rk_/);
      const forms = await relay('forms', 'list', '--site', site.id);
      expect(forms[0].recipients.map((r: { address: string }) => r.address)).toEqual(['sales@acme.test', '+4915112345678']);
      const bad = await sluice(['relay', 'sites', 'create', '--tenant', tenant, '--name', 'x', '--origin', 'https://acme.test/']).catch((err) => err);
      expect(bad.stderr).toContain('Validation failed: allowedOrigins[0] must be an origin');
      const login = await fetch(`http://127.0.0.1:${JSON.parse(logs.find((l) => l.includes('sluice is serving'))!).relayPort}/api/v1/admin/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'owner@acme.test', password: onboarded.oneTimePassword }),
      });
      expect(login.status).toBe(200);
      expect(logs.join('\n')).not.toContain('cli-captcha-secret');
      // Claim tokens: made, listed (never the token), revoked.
      const claim = await relay('handover', '--tenant', tenant);
      expect((await relay('handovers', 'list', '--tenant', tenant)).map((c: { id: string }) => c.id)).toEqual([claim.id]);
      expect(await relay('handovers', 'revoke', '--tenant', tenant, '--claim', claim.id)).toEqual({ revoked: claim.id });
      expect(await relay('handovers', 'list', '--tenant', tenant)).toEqual([]);
    });

    it('deactivates forms and recipients, clears origins, refuses a loose --active, and lists submissions', async () => {
      const relay = async (...args: string[]) => JSON.parse((await sluice(['relay', ...args])).stdout);
      const relayPort = JSON.parse(logs.find((l) => l.includes('sluice is serving'))!).relayPort;
      const { tenant } = await relay('onboard', '--tenant', 'Beta', '--owner', 'owner@beta.test');
      const site = await relay('sites', 'create', '--tenant', tenant.id, '--name', 'Shop', '--origin', 'https://beta.test');
      const form = await relay('forms', 'create', '--site', site.id, '--name', 'Orders', '--key', 'orders');
      const recipient = await relay('recipients', 'add', '--site', site.id, '--form', form.id, '--channel', 'email', '--address', 'orders@beta.test');
      expect((await relay('recipients', 'update', '--site', site.id, '--form', form.id, '--recipient', recipient.id, '--active', 'false')).active).toBe(false);
      for (const loose of ['no', 'FALSE', '0', '']) {
        const refused = await sluice(['relay', 'forms', 'update', '--site', site.id, '--form', form.id, '--active', loose]).catch((err) => err);
        expect(refused.stderr).toContain('Validation failed: active --active must be true or false');
      }
      expect((await relay('forms', 'update', '--site', site.id, '--form', form.id, '--active', 'false')).active).toBe(false);
      expect((await relay('forms', 'list', '--site', site.id))[0]).toMatchObject({ active: false, recipients: [{ active: false }] });
      expect((await relay('sites', 'update', '--site', site.id, '--clear-origins')).allowedOrigins).toEqual([]);

      await relay('forms', 'update', '--site', site.id, '--form', form.id, '--active', 'true');
      const posted = await fetch(`http://127.0.0.1:${relayPort}/api/v1/submissions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ siteKey: site.siteKey, formKey: 'orders', data: { item: 'tea' } }),
      });
      expect(posted.status).toBe(201);
      const { submissionId } = await posted.json() as { submissionId: string };
      const listed = await relay('submissions', 'list', '--site', site.id, '--form', form.id, '--limit', '5');
      expect(listed.submissions).toEqual([expect.objectContaining({ submissionId, data: { item: 'tea' }, jobs: 0 })]);
    });

    it('lists delivery jobs dead first, shows their attempts, retries them, and sets delivery settings without echoing secrets', async () => {
      const relay = async (...args: string[]) => JSON.parse((await sluice(['relay', ...args])).stdout);
      const relayPort = JSON.parse(logs.find((l) => l.includes('sluice is serving'))!).relayPort;
      const { tenant } = await relay('onboard', '--tenant', 'Gamma', '--owner', 'owner@gamma.test');
      const site = await relay('sites', 'create', '--tenant', tenant.id, '--name', 'Web');
      const form = await relay('forms', 'create', '--site', site.id, '--name', 'Contact', '--key', 'contact');
      await relay('recipients', 'add', '--site', site.id, '--form', form.id, '--channel', 'email', '--address', 'team@gamma.test');
      const posted = await fetch(`http://127.0.0.1:${relayPort}/api/v1/submissions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ siteKey: site.siteKey, formKey: 'contact', data: { hello: 'cli' } }),
      });
      expect(posted.status).toBe(201);
      // No SMTP server is configured here: the email job cannot be sent and is dead at once, saying why.
      const [dead] = await eventually(async () => {
        const { jobs } = await relay('jobs', 'list', '--site', site.id, '--form', form.id, '--state', 'dead');
        return jobs.length === 1 ? jobs : undefined;
      }, 90_000, 200); // each poll is a CLI process: seconds apiece on a loaded machine
      expect(dead).toMatchObject({ channel: 'email', destination: 'team@gamma.test', attempts: 1, providerStatus: 'not sent' });
      expect(dead.lastError).toMatch(/no SMTP server is configured/);
      const shown = await relay('jobs', 'show', '--tenant', tenant.id, '--job', dead.jobId);
      expect(shown.attempts.map((a: { state: string }) => a.state)).toEqual(['sending', 'dead']);
      expect(await relay('jobs', 'retry', '--tenant', tenant.id, '--job', dead.jobId)).toEqual({ jobId: dead.jobId, series: 2, state: 'queued' });
      const again = await eventually(async () => {
        const job = await relay('jobs', 'show', '--tenant', tenant.id, '--job', dead.jobId);
        return job.state === 'dead' && job.series === 2 ? job : undefined;
      }, 90_000, 200);
      expect(again.attempts.map((a: { series: number; state: string }) => `${a.series}:${a.state}`)).toEqual(['1:sending', '1:dead', '2:queued', '2:sending', '2:dead']);

      const smtpUrlFile = join(dataDir, '..', 'gamma-smtp-url');
      await writeFile(smtpUrlFile, 'smtp://gamma:s3cret-password@mail.gamma.test:587\n');
      const settings = await relay('delivery', 'set-email', '--tenant', tenant.id, '--from', 'Gamma <forms@gamma.test>', '--secret-file', smtpUrlFile);
      expect(settings.email).toEqual({ from: 'Gamma <forms@gamma.test>', smtpServerConfigured: true });
      expect(JSON.stringify(await relay('delivery', 'show', '--tenant', tenant.id))).not.toContain('s3cret');
    });

    it('never logs API keys', () => {
      expect(logs.join('\n')).not.toContain(created.apiKey);
    });
  });
});
