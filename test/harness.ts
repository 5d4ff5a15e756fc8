/**
 * Shared integration-test harness: starts a whole `sluice serve` in the test process on free
 * ports and a fresh data dir (one per test file: vitest's forks pool gives each file its own
 * process, and chDB binds one data dir per process).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type SluiceConfig } from '../core/config.ts';
import { createLogger, type Logger } from '../core/log.ts';
import { startServe, startSluice, type Role, type RunningSluice } from '../bin/app.ts';
import type { Storage } from '../storage/storage.ts';

export interface TestSluice extends RunningSluice {
  /** `serve` always has storage. */
  storage: Storage;
  config: Readonly<SluiceConfig>;
  dataDir: string;
  baseUrl: string;
  grpcAddress: string;
  /** A fresh source and its key. */
  apiKey: string;
  sourceId: string;
  /** Rows of a read-only query. */
  rows<T = Record<string, unknown>>(sql: string): Promise<T[]>;
  stop(): Promise<void>;
}

/**
 * A config for tests: free ports, quiet logs (SLUICE_TEST_LOG_LEVEL to see them), the HTTP
 * engine of the vitest project (SLUICE_TEST_HTTP_ENGINE: vitest.config.ts runs the HTTP-facing
 * files once per engine), the environment otherwise ignored. No memory budget by default: a
 * server started in the test process would count vitest's memory, and other servers', as its
 * own (the budget is tested on processes of its own, test/memory-limit-processes.test.ts).
 */
export function testConfig(dataDir: string, overrides: Record<string, unknown> = {}): Readonly<SluiceConfig> {
  return loadConfig(
    {},
    {
      dataDir,
      logLevel: process.env.SLUICE_TEST_LOG_LEVEL ?? 'silent',
      'http.engine': process.env.SLUICE_TEST_HTTP_ENGINE ?? 'node',
      'http.port': 0,
      'grpc.port': 0,
      'relay.port': 0,
      'console.port': 0,
      'pipeline.workers': 2,
      'memory.budgetMb': 0,
      ...overrides,
    },
  );
}

/** Starts one role of Sluice in this process with a test config. */
export function startTestRole(role: Role, dataDir: string, overrides: Record<string, unknown> = {}): Promise<RunningSluice> {
  const config = testConfig(dataDir, overrides);
  return startSluice(role, config, createLogger(config.logLevel, 'stderr'));
}

/** Starts `sluice serve` in this process with a test config; `log` replaces its stderr logger (a test that reads the log). */
export async function startTestSluice(overrides: Record<string, unknown> = {}, log?: Logger): Promise<TestSluice> {
  const dataDir = await mkdtemp(join(tmpdir(), 'sluice-test-'));
  const config = testConfig(dataDir, overrides);
  const app = await startServe(config, log ?? createLogger(config.logLevel, 'stderr'));
  const storage = app.storage!;
  const source = await app.sources.createSource('test');
  return {
    ...app,
    storage,
    config,
    dataDir,
    baseUrl: `http://127.0.0.1:${app.httpPort}`,
    grpcAddress: `127.0.0.1:${app.grpcPort}`,
    apiKey: source.apiKey,
    sourceId: source.id,
    async rows<T>(sql: string): Promise<T[]> {
      const text = await storage.query(sql, 'JSONEachRow');
      return text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as T);
    },
    async stop() {
      await app.shutdown();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Polls until fn returns a truthy value or the time is up (for eventually-true conditions). */
export async function eventually<T>(fn: () => Promise<T> | T, timeoutMs = 10_000, intervalMs = 50): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** A connection to the machine's NATS, or an error that says how to get one. */
export function connectNats(url: string): Promise<NatsConnection> {
  return connect({ servers: url }).catch((err) => {
    throw new Error(`no NATS with JetStream at ${url} (run deploy/services.sh): ${err.message}`);
  });
}

/** Deletes the JetStream streams and KV buckets a test run made under its prefixes. */
export async function removeNatsPrefixes(url: string, prefixes: string[]): Promise<void> {
  const nc = await connect({ servers: url });
  try {
    const jsm = await jetstreamManager(nc);
    for await (const stream of jsm.streams.list()) {
      const name = stream.config.name;
      if (prefixes.some((p) => name.startsWith(p) || name.startsWith(`KV_${p.toLowerCase()}`))) await jsm.streams.delete(name);
    }
  } finally {
    await nc.close();
  }
}
