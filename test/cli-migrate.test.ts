/**
 * `sluice migrate` touches the storage only. In a cluster it runs before (or while) JetStream
 * elects a leader — docker-compose starts it beside a fresh 3-node NATS — so it must not open
 * NATS at all. Storage here is the ClickHouse facade (test/clickhouse-facade.ts): the real
 * server driver against chDB, as the cluster process tests use it.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startClickhouseFacade, type ClickhouseFacade } from './clickhouse-facade.ts';

const run = promisify(execFile);
const SLUICE = fileURLToPath(new URL('../bin/sluice.mjs', import.meta.url));
/** Nothing listens on port 1: a NATS that cannot be reached, as before a cluster has started. */
const NO_NATS = 'nats://127.0.0.1:1';

let dataDir: string;
let facade: ClickhouseFacade;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sluice-migrate-'));
  facade = await startClickhouseFacade();
}, 60_000);
afterAll(async () => {
  await facade?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

/** Runs `sluice migrate` with only these settings (the test's own environment is not passed on). */
const migrate = (env: Record<string, string>) =>
  run(process.execPath, [SLUICE, 'migrate'], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, SLUICE_DATA_DIR: dataDir, SLUICE_LOG_LEVEL: 'warn', ...env },
    timeout: 60_000,
  });

describe('sluice migrate', () => {
  it('creates the schema on a ClickHouse server while NATS cannot be reached', async () => {
    const first = JSON.parse((await migrate({ NATS_URL: NO_NATS, CLICKHOUSE_URL: facade.url })).stdout);
    expect(first.applied.length).toBeGreaterThan(0);
    expect(first.current).toBeGreaterThan(0);
    const tables = (await facade.rows<{ name: string }>("SELECT name FROM system.tables WHERE database = 'otel'")).map((t) => t.name);
    expect(tables).toEqual(expect.arrayContaining(['otel_traces', 'otel_logs', 'sluice_schema_migrations']));

    // Again: nothing left to apply, same version.
    const second = JSON.parse((await migrate({ NATS_URL: NO_NATS, CLICKHOUSE_URL: facade.url })).stdout);
    expect(second).toEqual({ applied: [], current: first.current });
  });

  it('fails on storage alone: the error names ClickHouse, never NATS', async () => {
    const error = await migrate({ NATS_URL: NO_NATS, CLICKHOUSE_URL: 'http://127.0.0.1:1' }).catch((err) => err);
    expect(error.code).toBe(1);
    expect(error.stderr).toContain('cannot reach ClickHouse at http://127.0.0.1:1');
    expect(error.stderr).not.toMatch(/nats/i);
  });

  it('on the embedded default migrates chDB in the data dir and releases the data dir', async () => {
    const report = JSON.parse((await migrate({})).stdout);
    expect(report.current).toBeGreaterThan(0);
    expect(existsSync(join(dataDir, 'clickhouse'))).toBe(true);
    expect(existsSync(join(dataDir, 'sluice.pid'))).toBe(false);
  });
});
