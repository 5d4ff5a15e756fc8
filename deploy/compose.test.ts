/**
 * docker-compose.yml as Compose reads it (`docker-compose config`, no engine needed; installed
 * by deploy/services.sh): it parses, it wires the cluster docs/guides/cluster.md describes, and it starts in
 * an order that works on a first `up` — every long-running service has a health check, every
 * dependency waits for health (or for the one-shot `migrate` to succeed), and `migrate` waits
 * for ClickHouse only. The files it points at (Dockerfile, nginx and NATS configs) agree with it.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../core/config.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MASTER_KEY = 'x'.repeat(43) + '=';
const CLICKHOUSE_PASSWORD = 'c0ffee'.repeat(8);
/** This shell's environment without what the file reads, so the file's defaults show. */
const { SLUICE_PUBLIC_URL: _url, SLUICE_BIND: _bind, SLUICE_RELAY_MASTER_KEY: _key, SLUICE_CLICKHOUSE_PASSWORD: _password, ...shellEnv } = process.env;
const SECRETS = { SLUICE_RELAY_MASTER_KEY: MASTER_KEY, SLUICE_CLICKHOUSE_PASSWORD: CLICKHOUSE_PASSWORD };

/** `docker-compose [args] config` with `env`: the services as Compose reads them (v1 lists every profile's). */
async function composed(env: Record<string, string>, args: string[] = []): Promise<Record<string, Service>> {
  const { stdout } = await run('docker-compose', [...args, 'config'], { cwd: ROOT, env: { ...shellEnv, ...env } });
  return (parse(stdout) as { services: Record<string, Service> }).services;
}

/** The services a plain `up` starts: those of no profile. */
const unprofiled = (all: Record<string, Service>) => Object.fromEntries(Object.entries(all).filter(([, service]) => !service.profiles));

interface Service {
  image?: string;
  build?: unknown;
  pull_policy?: string;
  restart?: string;
  command?: string[];
  environment?: Record<string, string>;
  /** Compose v1 prints the short form (`127.0.0.1:4318:4318/tcp`), v2 the long one: portsOf() reads both. */
  ports?: Array<string | { published: number | string; target: number; host_ip?: string }>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test?: string[]; disable?: boolean };
  profiles?: string[];
  volumes?: string[];
  entrypoint?: string[];
  ulimits?: { nofile?: { soft: number; hard: number } };
}

let services: Record<string, Service>;

/** A service's published ports, as `address:port` (`0.0.0.0` where Compose names no address). */
function portsOf(service: Service): string[] {
  return (service.ports ?? []).map((port) => {
    if (typeof port !== 'string') return `${port.host_ip ?? '0.0.0.0'}:${port.published}`;
    const parts = port.replace(/\/\w+$/, '').split(':');
    return parts.length === 3 ? `${parts[0]}:${parts[1]}` : `0.0.0.0:${parts[0]}`;
  });
}

beforeAll(async () => {
  services = await composed(SECRETS).catch((err) => {
    throw new Error(`docker-compose config failed (run deploy/services.sh to install it): ${err.stderr ?? err.message}`);
  });
});

const SLUICE_ROLES = ['gateway-1', 'gateway-2', 'consumer-1', 'consumer-2', 'deliver-1', 'migrate'];
const NATS = ['nats-1', 'nats-2', 'nats-3'];
const healthy = { condition: 'service_healthy' };

describe('docker-compose.yml', () => {
  it('is accepted by Compose and runs the cluster docs/guides/cluster.md describes', () => {
    expect(Object.keys(unprofiled(services)).sort()).toEqual(
      ['clickhouse', 'consumer-1', 'consumer-2', 'deliver-1', 'gateway-1', 'gateway-2', 'lb', 'migrate', 'nats-1', 'nats-2', 'nats-3', 'redis'],
    );
    expect(services['deliver-1']!.command).toEqual(['deliver']);
    expect(services['deliver-1']!.environment!.SLUICE_RELAY_MASTER_KEY).toBe(MASTER_KEY);
    for (const name of ['gateway-1', 'gateway-2']) expect(services[name]!.command).toEqual(['gateway']);
    for (const name of ['consumer-1', 'consumer-2']) expect(services[name]!.command).toEqual(['consume']);
    expect(services.migrate!.command).toEqual(['migrate']);
    for (const name of SLUICE_ROLES) {
      expect(services[name]!.environment, name).toMatchObject({ SLUICE_NATS_REPLICAS: '3', NATS_URL: expect.stringContaining('nats-3') });
    }
    expect(services['gateway-1']!.environment!.SLUICE_RELAY_MASTER_KEY).toBe(MASTER_KEY);
    expect(portsOf(services.lb!).map((port) => port.split(':')[1])).toEqual(['4318', '4317', '8080', '4320']);
    // One ClickHouse server and plain tables unless deploy/clickhouse/sharded.env says otherwise.
    for (const name of SLUICE_ROLES) {
      expect(services[name]!.environment, name).toMatchObject({ SLUICE_CLICKHOUSE_CLUSTER: '', SLUICE_CLICKHOUSE_REPLICATED: 'false', SLUICE_CLICKHOUSE_DISTRIBUTED: 'false' });
    }
    expect(services.clickhouse!.volumes).toContain(`${ROOT}deploy/clickhouse/single.xml:/etc/clickhouse-server/config.d/sluice.xml:ro`);
    expect(services.clickhouse!.environment!.SLUICE_READY_QUERY).toBe('SELECT 1');
  });

  it('builds the Sluice image once: migrate builds sluice:local, the others run it and never pull it', () => {
    expect(Object.keys(services).filter((name) => services[name]!.build !== undefined)).toEqual(['migrate']);
    expect(services.migrate).toMatchObject({ image: 'sluice:local', pull_policy: 'build' });
    for (const name of SLUICE_ROLES.filter((n) => n !== 'migrate')) {
      expect(services[name], name).toMatchObject({ image: 'sluice:local', pull_policy: 'never' });
    }
  });

  it('gives every long-running service a health check; migrate is a one-shot that is not restarted', () => {
    for (const [name, service] of Object.entries(services)) {
      if (name === 'migrate') continue;
      expect(service.healthcheck?.disable, name).not.toBe(true);
      expect(service.healthcheck?.test?.[0], name).toMatch(/^CMD(-SHELL)?$/);
    }
    expect(services.migrate!.healthcheck).toBeUndefined();
    expect(services.migrate!.restart).toBeUndefined();
  });

  it('starts each service after what it needs is healthy; migrate needs ClickHouse and never NATS', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const [dependency, { condition }] of Object.entries(service.depends_on ?? {})) {
        // Only a one-shot is waited for by its exit; anything else must be healthy.
        expect([name, dependency, condition]).toEqual([name, dependency, dependency === 'migrate' ? 'service_completed_successfully' : 'service_healthy']);
      }
    }
    expect(services.migrate!.depends_on).toEqual({ clickhouse: healthy });
    const natsReady = Object.fromEntries(NATS.map((n) => [n, healthy]));
    for (const name of ['gateway-1', 'gateway-2']) expect(services[name]!.depends_on, name).toEqual({ ...natsReady, redis: healthy });
    for (const name of ['consumer-1', 'consumer-2']) {
      expect(services[name]!.depends_on, name).toEqual({ ...natsReady, clickhouse: healthy, migrate: { condition: 'service_completed_successfully' } });
    }
    expect(services['deliver-1']!.depends_on).toEqual(natsReady);
    expect(services.lb!.depends_on).toEqual({ 'gateway-1': healthy, 'gateway-2': healthy });
  });

  it('refuses to start without its secrets, saying which and how to make one', async () => {
    for (const missing of Object.keys(SECRETS)) {
      const without = Object.fromEntries(Object.entries(SECRETS).filter(([name]) => name !== missing));
      const refused = await composed(without).then(() => 'accepted', (err) => String(err.stderr));
      expect(refused, missing).toContain(`set ${missing} (openssl rand`);
    }
    // No password of its own in the file: the one given is used everywhere ClickHouse is reached.
    const file = await readFile(`${ROOT}docker-compose.yml`, 'utf8');
    expect(file).not.toMatch(/default:sluice@|CLICKHOUSE_PASSWORD: sluice|--password", "sluice"/);
    expect(services.clickhouse!.environment!.CLICKHOUSE_PASSWORD).toBe(CLICKHOUSE_PASSWORD);
    for (const name of SLUICE_ROLES) expect(services[name]!.environment!.CLICKHOUSE_URL, name).toBe(`http://default:${CLICKHOUSE_PASSWORD}@clickhouse:8123`);
  });

  it('publishes its ports on loopback unless SLUICE_BIND says otherwise', async () => {
    expect(portsOf(services.lb!)).toEqual(['127.0.0.1:4318', '127.0.0.1:4317', '127.0.0.1:8080', '127.0.0.1:4320']);
    const everywhere = await composed({ ...SECRETS, SLUICE_BIND: '0.0.0.0' });
    expect(portsOf(everywhere.lb!)).toEqual(['0.0.0.0:4318', '0.0.0.0:4317', '0.0.0.0:8080', '0.0.0.0:4320']);
    for (const [name, service] of Object.entries(services)) if (name !== 'lb') expect(service.ports, name).toBeUndefined();
  });

  it('tells agents the URL they reach through nginx', () => {
    for (const name of SLUICE_ROLES) expect(services[name]!.environment!.SLUICE_PUBLIC_URL, name).toBe('http://localhost:4318');
    expect(portsOf(services.lb!)).toContain('127.0.0.1:4318');
  });

  it("checks a Sluice container's readiness with node alone: 0 when /api/v1/ready answers 200, 1 on 503 or no answer", async () => {
    const test = services['gateway-1']!.healthcheck!.test!;
    expect(test.slice(0, 3)).toEqual(['CMD', 'node', '-e']);
    for (const name of SLUICE_ROLES.filter((n) => n !== 'migrate')) expect(services[name]!.healthcheck!.test, name).toEqual(test);
    const check = (port: number) =>
      run(process.execPath, test.slice(2), { env: { PATH: process.env.PATH, SLUICE_OTLP_HTTP_PORT: String(port) } }).then(() => 0, (err) => err.code as number);

    let ready = true;
    const server = createServer((req, res) => res.writeHead(req.url === '/api/v1/ready' ? (ready ? 200 : 503) : 404).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      expect(await check(port)).toBe(0);
      ready = false;
      expect(await check(port)).toBe(1);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    expect(await check(port)).toBe(1); // nobody listens any more
  });

  it("checks NATS on the monitoring port its config enables, with the full /healthz (a leader and current streams)", async () => {
    for (const name of NATS) {
      const conf = await readFile(`${ROOT}deploy/nats/${name}.conf`, 'utf8');
      const monitorPort = /^http:\s*[\d.]+:(\d+)\s*$/m.exec(conf)?.[1];
      expect(monitorPort, `${name}.conf enables the monitoring port`).toBeDefined();
      // js-enabled-only answers ok before JetStream has a leader: dependents would start too early.
      expect(services[name]!.healthcheck!.test!.at(-1), name).toBe(`http://127.0.0.1:${monitorPort}/healthz`);
    }
  });

  it('in the sharded profile runs 2 shards x 2 replicas and a Keeper, and points every Sluice service at them', async () => {
    const sharded = await composed(SECRETS, ['--env-file', 'deploy/clickhouse/sharded.env']);
    const env = Object.fromEntries((await readFile(`${ROOT}deploy/clickhouse/sharded.env`, 'utf8')).split('\n').filter((l) => /^\w+=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
    expect(env.COMPOSE_PROFILES).toBe('sharded');
    const nodes = ['clickhouse-1-2', 'clickhouse-2-1', 'clickhouse-2-2'];
    expect(Object.keys(sharded).filter((name) => sharded[name]!.profiles).sort()).toEqual([...nodes, 'clickhouse-keeper']);
    for (const name of SLUICE_ROLES) {
      expect(sharded[name]!.environment, name).toMatchObject({
        CLICKHOUSE_URL: `http://default:${CLICKHOUSE_PASSWORD}@clickhouse:8123`, SLUICE_CLICKHOUSE_CLUSTER: 'sluice', SLUICE_CLICKHOUSE_REPLICATED: 'true', SLUICE_CLICKHOUSE_DISTRIBUTED: 'true',
      });
    }
    // Each node is the replica cluster.xml names it by, in the shard it says; `clickhouse` is shard 1's first.
    const cluster = await readFile(`${ROOT}deploy/clickhouse/cluster.xml`, 'utf8');
    expect(cluster).toContain('<sluice>');
    const shards = [...cluster.matchAll(/<shard>([^]*?)<\/shard>/g)].map((m) => [...m[1]!.matchAll(/<host>([^<]+)<\/host>/g)].map((h) => h[1]));
    expect(shards).toEqual([['clickhouse', 'clickhouse-1-2'], ['clickhouse-2-1', 'clickhouse-2-2']]);
    for (const [shard, replicas] of shards.entries()) {
      for (const name of replicas) {
        expect(sharded[name]!.environment, name).toMatchObject({ SLUICE_SHARD: String(shard + 1), SLUICE_REPLICA: name, CLICKHOUSE_PASSWORD });
        expect(sharded[name]!.volumes, name).toContain(`${ROOT}deploy/clickhouse/cluster.xml:/etc/clickhouse-server/config.d/sluice.xml:ro`);
        expect(sharded[name]!.image, name).toBe(sharded.clickhouse!.image);
      }
    }
    expect(cluster).toContain('<node><host>clickhouse-keeper</host><port>9181</port></node>');
    const keeper = await readFile(`${ROOT}deploy/clickhouse/keeper.xml`, 'utf8');
    expect(keeper).toMatch(/<tcp_port>9181<\/tcp_port>[^]*<hostname>clickhouse-keeper<\/hostname>/);
    expect(sharded['clickhouse-keeper']!.healthcheck!.test).toContain('9181');
    // migrate waits for `clickhouse`, which is healthy only once all four replicas and Keeper answer.
    expect(sharded.migrate!.depends_on).toEqual({ clickhouse: healthy });
    expect(sharded.clickhouse!.environment!.SLUICE_READY_QUERY).toBe(env.SLUICE_CLICKHOUSE_READY_QUERY);
    expect(env.SLUICE_CLICKHOUSE_READY_QUERY).toMatch(/throwIf\(count\(\) != 4\) FROM clusterAllReplicas\('sluice', system\.one\); SELECT .* FROM system\.zookeeper/);
    // `--profile sharded` alone is a valid file too (the nodes, without Sluice pointed at them).
    expect(Object.keys(await composed(SECRETS, ['--profile', 'sharded']))).toContain('clickhouse-keeper');
  });

  it('runs the Sluice container as a user other than root, owning its data dir', async () => {
    const dockerfile = await readFile(`${ROOT}Dockerfile`, 'utf8');
    const users = [...dockerfile.matchAll(/^USER\s+(\S+)/gm)].map((m) => m[1]);
    expect(users.at(-1)).toBeDefined();
    expect(users.at(-1)).not.toMatch(/^(root|0)(:|$)/);
    expect(dockerfile).toMatch(new RegExp(`chown ${users.at(-1)}(:\\S+)? /data`));
  });

  it("sizes nginx for ingest: the gateways' body limit, a worker per core, open files the container allows, its own health port", async () => {
    const nginx = await readFile(`${ROOT}deploy/nginx/nginx.conf`, 'utf8');
    const directive = (name: string) => [...nginx.matchAll(new RegExp(`^\\s*${name}\\s+([^;]+);`, 'gm'))].map((m) => m[1]!.trim());
    const defaultMaxBody = loadConfig({}).limits.maxBodyBytes;
    expect(directive('client_max_body_size')[0]).toBe(`${defaultMaxBody / 1024 / 1024}m`);
    expect(directive('worker_processes')).toEqual(['auto']);
    const rlimit = Number(directive('worker_rlimit_nofile')[0]);
    expect(rlimit).toBeGreaterThanOrEqual(2 * Number(directive('worker_connections')[0]));
    expect(services.lb!.ulimits!.nofile!.soft).toBeGreaterThanOrEqual(rlimit);
    for (const upstream of ['sluice_http', 'sluice_grpc', 'sluice_relay', 'sluice_console']) {
      expect(nginx, upstream).toMatch(new RegExp(`upstream ${upstream} \\{[^}]*keepalive \\d+;`));
    }
    expect(directive('listen')).toContain('127.0.0.1:8081');
    expect(services.lb!.healthcheck!.test!.at(-1)).toBe('http://127.0.0.1:8081/healthz');
  });
});
