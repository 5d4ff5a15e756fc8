/**
 * What the alerts tests share: a real LocalStateStore in a directory of its own with a clock the
 * test moves, a store whose reads can be made to race with another write, and rules to test with.
 * Not used outside tests.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { createLogger, type Logger } from '../core/log.ts';
import { LocalStateStore } from '../state/local.ts';
import type { StateStore } from '../state/store.ts';
import type { AlertRule } from './model.ts';
import type { RuleFields } from './rules.ts';

export const START = Date.parse('2026-12-01T12:00:00Z');

export interface Clock {
  now: () => number;
  advance(ms: number): void;
}

export interface StoreFixture {
  store: LocalStateStore;
  clock: Clock;
  /** Shuts the store down and removes its directory. */
  close(): Promise<void>;
}

/** Call at a test file's top level: each fixture the function it returns opens is closed after its test. */
export function storeFixtures(): () => Promise<StoreFixture> {
  const open: StoreFixture[] = [];
  afterEach(async () => {
    for (const fixture of open.splice(0)) await fixture.close();
  });
  return async () => {
    const fixture = await storeFixture();
    open.push(fixture);
    return fixture;
  };
}

async function storeFixture(): Promise<StoreFixture> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-alerts-'));
  let now = START;
  const clock: Clock = { now: () => now, advance: (ms) => void (now += ms) };
  const store = new LocalStateStore(dir, clock.now);
  await store.start();
  return { store, clock, close: async () => { await store.shutdown(); await rm(dir, { recursive: true, force: true }); } };
}

/**
 * `store`, but the next getVersioned of `key` runs `meanwhile` after reading and before
 * answering: another writer's change lands between a read and the write that follows it.
 */
export function racingStore(store: StateStore, key: string, meanwhile: () => Promise<unknown>): StateStore {
  let armed = true;
  return {
    start: () => store.start(),
    shutdown: () => store.shutdown(),
    get: (bucket, k) => store.get(bucket, k),
    put: (bucket, k, value) => store.put(bucket, k, value),
    create: (bucket, k, value) => store.create(bucket, k, value),
    update: (bucket, k, value, revision) => store.update(bucket, k, value, revision),
    delete: (bucket, k) => store.delete(bucket, k),
    expireAfter: (bucket, ttlMs) => store.expireAfter(bucket, ttlMs),
    list: (bucket, onEvent) => store.list(bucket, onEvent),
    watch: (bucket, onChange, onEvent) => store.watch(bucket, onChange, onEvent),
    getVersioned: async (bucket, k) => {
      const read = await store.getVersioned(bucket, k);
      if (armed && k === key) {
        armed = false;
        await meanwhile();
      }
      return read as never;
    },
  };
}

/** A valid rule body: an error rate above 5 % over 5 minutes. */
export function ruleFields(overrides: Partial<RuleFields> = {}): RuleFields {
  return {
    name: 'checkout errors',
    condition: { kind: 'error_rate', service: 'checkout' },
    comparator: 'above',
    threshold: 0.05,
    windowSeconds: 300,
    forSeconds: 0,
    noData: 'ok',
    labels: {},
    repeatSeconds: 0,
    enabled: true,
    ...overrides,
  };
}

/** A stored-looking rule, for the pure state machine. */
export function testRule(overrides: Partial<AlertRule> = {}): AlertRule {
  return { ...ruleFields(), id: 'alr_0123456789abcdef', tenantId: 'tnt_a', createdAt: START, updatedAt: START, ...overrides };
}

/** A logger whose lines the test reads. */
export function capturedLogger(): { log: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { log: createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) }), lines };
}
