import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, OPTIONS } from './config.ts';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-config-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({});
    expect(config.dataDir).toBe('./data');
    expect(config.host).toBe('127.0.0.1');
    expect(config.http.port).toBe(4318);
    expect(config.grpc.port).toBe(4317);
    // node:http answers HTTP/1.0 (nginx's default proxy_pass), a missing Host and bare LF; uWebSockets.js does not (test/http-hostile.test.ts).
    expect(config.http.engine).toBe('node');
    expect(config.limits.maxBodyBytes).toBe(10 * 1024 * 1024);
    expect(config.limits.ratePerMinute).toBe(600);
    expect(Object.isFrozen(config.limits)).toBe(true);
  });

  it('reads the environment over the config file', () => {
    const dir = tempDir();
    const file = join(dir, 'sluice.json');
    writeFileSync(file, JSON.stringify({ host: '0.0.0.0', http: { port: 9000 }, limits: { trustedProxies: ['10.0.0.1'] } }));
    const config = loadConfig({ SLUICE_CONFIG: file, SLUICE_OTLP_HTTP_PORT: '9001', SLUICE_TRUSTED_PROXIES: '10.0.0.2, 10.0.0.3' });
    expect(config.host).toBe('0.0.0.0');
    expect(config.http.port).toBe(9001);
    expect(config.limits.trustedProxies).toEqual(['10.0.0.2', '10.0.0.3']);
  });

  it('reports every problem with its path', () => {
    const dir = tempDir();
    const file = join(dir, 'sluice.json');
    writeFileSync(file, JSON.stringify({ http: { prot: 1 }, colour: 'blue' }));
    let error: unknown;
    try {
      loadConfig({ SLUICE_CONFIG: file, SLUICE_OTLP_GRPC_PORT: 'x', SLUICE_LOG_LEVEL: 'loud', SLUICE_WORKERS: '0' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toEqual(
      expect.arrayContaining([
        'http.prot: unknown option',
        'colour: unknown option',
        'grpc.port (SLUICE_OTLP_GRPC_PORT): must be integer',
        expect.stringMatching(/^logLevel \(SLUICE_LOG_LEVEL\): must be equal to one of the allowed values/),
        'pipeline.workers (SLUICE_WORKERS): must be >= 1',
      ]),
    );
  });

  it('refuses service URLs that do not parse without echoing their passwords', () => {
    const dir = tempDir();
    const file = join(dir, 'sluice.json');
    // Not JSON: V8's parse error would quote the text around the bad token.
    writeFileSync(file, '{"relay": {"operatorToken": secret-token-5}}');
    let error: unknown;
    try {
      loadConfig({
        SLUICE_CONFIG: file,
        NATS_URL: 'nats://127.0.0.1:4222, nats://user:secret-pw-1@[::1',
        REDIS_URL: 'redis://user:secret-pw-2@[::1',
        CLICKHOUSE_URL: 'http://default:secret-pw-3@[ch',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const { problems, message } = error as ConfigError;
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^SLUICE_CONFIG: cannot read .*sluice\.json: Unexpected token 's' \(not valid JSON\)$/),
        expect.stringMatching(/^nats\.url \(NATS_URL\): must be a valid URL/),
        expect.stringMatching(/^redis\.url \(REDIS_URL\): must be a valid URL/),
        expect.stringMatching(/^clickhouse\.url \(CLICKHOUSE_URL\): must be a valid URL/),
      ]),
    );
    expect(message).not.toMatch(/secret/);
  });

  it('takes NATS servers without a scheme, as nats.js does', () => {
    expect(loadConfig({ NATS_URL: 'nats://n1:4222,n2:4222, user:pw@n3:4222' }).nats.url).toContain('n3');
  });

  it('refuses NATS servers that one set of nats.js options cannot reach: other credentials, or tls:// beside nats://', () => {
    const problemsOf = (url: string) => {
      try {
        loadConfig({ NATS_URL: url });
      } catch (err) {
        return (err as ConfigError).problems;
      }
      return [];
    };
    expect(problemsOf('nats://a:secret-pw-1@n1,nats://b:secret-pw-2@n2')).toEqual([
      'nats.url (NATS_URL): its servers carry different credentials; give every server the same ones (one set is sent to all of them)',
    ]);
    expect(problemsOf('tls://n1:4222,nats://n2:4222')).toEqual(['nats.url (NATS_URL): give every server the same scheme, tls:// or nats://']);
  });

  it('turns the query endpoint on only with a password, and only on the embedded engine', () => {
    expect(loadConfig({}).query.port).toBe(0);
    const on = loadConfig({ SLUICE_QUERY_PORT: '8123', SLUICE_QUERY_PASSWORD: 'twelve-chars' });
    expect(on.query).toMatchObject({ port: 8123, user: 'grafana', maxExecutionSeconds: 30, resultOverflowMode: 'throw' });

    const problemsOf = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (err) {
        return (err as ConfigError).problems;
      }
      return [];
    };
    expect(problemsOf({ SLUICE_QUERY_PORT: '8123' })).toEqual([expect.stringMatching(/^query\.password \(SLUICE_QUERY_PASSWORD\): required when query\.port is set/)]);
    const short = problemsOf({ SLUICE_QUERY_PORT: '8123', SLUICE_QUERY_PASSWORD: 'short-secre' });
    expect(short).toHaveLength(1);
    expect(short.join()).not.toContain('short-secre');
    expect(problemsOf({ SLUICE_QUERY_PORT: '8123', SLUICE_QUERY_PASSWORD: 'twelve-chars', CLICKHOUSE_URL: 'http://ch:8123' })).toEqual([
      expect.stringMatching(/^query\.port \(SLUICE_QUERY_PORT\): the query endpoint serves the embedded chDB only/),
    ]);
  });

  it('keeps the development inbox off by default, and refuses it in a cluster (NATS_URL) at start-up', () => {
    expect(loadConfig({}).delivery.inbox).toBe(false);
    expect(loadConfig({ SLUICE_DELIVERY_INBOX: 'true' }).delivery.inbox).toBe(true);
    let problems: string[] = [];
    try {
      loadConfig({ SLUICE_DELIVERY_INBOX: 'true', NATS_URL: 'nats://n1:4222' });
    } catch (err) {
      problems = (err as ConfigError).problems;
    }
    expect(problems).toEqual([
      'delivery.inbox (SLUICE_DELIVERY_INBOX): the development inbox is a feature of the embedded default (npm start), where nothing is sent; refused with NATS_URL (a cluster delivers for real)',
    ]);
    expect(loadConfig({ SLUICE_DELIVERY_INBOX: 'false', NATS_URL: 'nats://n1:4222' }).delivery.inbox).toBe(false);
  });

  it('shards the tables only over a named cluster, and says so at start-up', () => {
    expect(loadConfig({}).clickhouse.distributed).toBe(false);
    const problems = (() => {
      try {
        loadConfig({ SLUICE_CLICKHOUSE_DISTRIBUTED: 'true' });
        return [];
      } catch (err) {
        return (err as ConfigError).problems;
      }
    })();
    expect(problems).toEqual(['clickhouse.distributed (SLUICE_CLICKHOUSE_DISTRIBUTED): needs SLUICE_CLICKHOUSE_CLUSTER, the cluster the tables are sharded over']);
    expect(loadConfig({ SLUICE_CLICKHOUSE_DISTRIBUTED: 'true', SLUICE_CLICKHOUSE_CLUSTER: 'sluice' }).clickhouse).toMatchObject({ cluster: 'sluice', distributed: true });
  });

  it('is documented in docs/reference/configuration.md by the table written from OPTIONS (npm run docs:config -- --write)', async () => {
    const { readFile } = await import('node:fs/promises');
    const { configReference, referenceTable } = await import('../bin/config-reference.ts');
    const page = await readFile(new URL('../docs/reference/configuration.md', import.meta.url), 'utf8');
    expect(referenceTable(page)).toBe(configReference());
    for (const option of OPTIONS) expect(configReference(), option.env).toContain(`| \`${option.env}\` | \`${option.path}\` |`);
  });
});
