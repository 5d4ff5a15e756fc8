/**
 * docker-compose.yml as Compose reads it (`docker-compose config`, no engine needed; installed
 * by deploy/services.sh): it parses, and it wires the cluster the README describes.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('docker-compose.yml', () => {
  it('is accepted by Compose and runs the cluster the README describes', async () => {
    const { stdout } = await run('docker-compose', ['config'], { cwd: ROOT, env: { ...process.env, SLUICE_RELAY_MASTER_KEY: 'x'.repeat(43) + '=' } }).catch((err) => {
      throw new Error(`docker-compose config failed (run deploy/services.sh to install it): ${err.stderr ?? err.message}`);
    });
    const config = parse(stdout) as { services: Record<string, { command?: string[]; environment?: Record<string, string>; ports?: unknown[]; depends_on?: Record<string, unknown> }> };
    const services = config.services;
    expect(Object.keys(services).sort()).toEqual(
      ['clickhouse', 'consumer-1', 'consumer-2', 'gateway-1', 'gateway-2', 'lb', 'migrate', 'nats-1', 'nats-2', 'nats-3', 'redis'],
    );
    for (const name of ['gateway-1', 'gateway-2']) expect(services[name]!.command).toEqual(['gateway']);
    for (const name of ['consumer-1', 'consumer-2']) expect(services[name]!.command).toEqual(['consume']);
    for (const name of ['gateway-1', 'gateway-2', 'consumer-1', 'consumer-2', 'migrate']) {
      expect(services[name]!.environment, name).toMatchObject({ SLUICE_NATS_REPLICAS: '3', NATS_URL: expect.stringContaining('nats-3') });
    }
    expect(services['gateway-1']!.environment!.SLUICE_RELAY_MASTER_KEY).toBe('x'.repeat(43) + '=');
    expect(services['consumer-1']!.depends_on).toHaveProperty('migrate');
    expect(JSON.stringify(services.lb!.ports)).toMatch(/4318.*4317.*8080/);
  });
});
