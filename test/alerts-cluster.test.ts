/**
 * The alert evaluator in a cluster, killed: real `sluice` processes (two gateways serving the
 * relay and the console, a consumer, a delivery worker) on the real nats-server (NATS_URL,
 * default nats://127.0.0.1:4222, under a prefix of this run's own), storage behind the
 * ClickHouse facade (test/clickhouse-facade.ts). Both gateways run an evaluator; the lease in
 * the state store lets one work. A rule fires and its signed webhook arrives; the process
 * holding the lease is killed with SIGKILL; the other takes the lease over once it lapses
 * (three intervals) and sends the resolved notification. Exactly one firing and one resolved
 * webhook arrive, each delivered once.
 * Each process logs to <name>.log in a temp dir sluice-alerts-cluster-… (SLUICE_TEST_KEEP=1 keeps it).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsKvStateStore } from '../state/nats-kv.ts';
import { sendSpans } from './alerting.ts';
import { startClickhouseFacade, type ClickhouseFacade } from './clickhouse-facade.ts';
import { ConsoleClient } from './console-client.ts';
import { startWebhookReceiver, type WebhookCall, type WebhookReceiver } from './delivery-peers.ts';
import { connectNats, eventually, removeNatsPrefixes } from './harness.ts';
import { RelayClient } from './relay-client.ts';
import { freePort, runSluice, startSluiceProcess, type SluiceProcess, type SluiceRole } from './sluice-processes.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const prefix = `A${randomBytes(4).toString('hex').toUpperCase()}`;
const OPERATOR_TOKEN = `op_${randomBytes(12).toString('hex')}`;
const INTERVAL_SECONDS = 5;
/** A few rounds, a lease lapsing (three intervals) and a delivery, on a loaded 2-core machine. */
const WAIT_MS = 90_000;

let dir: string;
let facade: ClickhouseFacade | undefined;
let hook: WebhookReceiver | undefined;
let nc: NatsConnection | undefined;
const processes: SluiceProcess[] = [];
const consolePorts = new Map<SluiceProcess, number>();

function env(): Record<string, string> {
  return {
    NATS_URL,
    SLUICE_NATS_PREFIX: prefix,
    SLUICE_NATS_MAX_STREAM_BYTES: String(64 * 1024 * 1024),
    CLICKHOUSE_URL: facade!.url,
    SLUICE_RELAY_MASTER_KEY: MASTER_KEY,
    SLUICE_RELAY_OPERATOR_TOKEN: OPERATOR_TOKEN,
    SLUICE_RELAY_ALLOW_PRIVATE_WEBHOOKS: 'true',
    SLUICE_TRUSTED_PROXIES: '127.0.0.1',
    SLUICE_ALERT_INTERVAL_SECONDS: String(INTERVAL_SECONDS),
    SLUICE_DELIVERY_BACKOFF_BASE_MS: '200',
    SLUICE_DELIVERY_BACKOFF_MAX_MS: '1000',
    SLUICE_WORKERS: '1',
  };
}
const MASTER_KEY = randomBytes(32).toString('base64');

async function start(role: SluiceRole, name: string): Promise<SluiceProcess> {
  const consolePort = role === 'gateway' ? await freePort() : 0;
  const running = await startSluiceProcess(role, name, dir, { ...env(), ...(consolePort ? { SLUICE_CONSOLE_PORT: String(consolePort) } : {}) });
  processes.push(running);
  if (consolePort) consolePorts.set(running, consolePort);
  return running;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-alerts-cluster-'));
  [facade, hook] = await Promise.all([startClickhouseFacade(), startWebhookReceiver()]);
  nc = await connectNats(NATS_URL);
  expect(JSON.parse(await runSluice(['migrate'], env())).current).toBeGreaterThan(0);
}, 120_000);

afterAll(async () => {
  await hook?.close();
  await Promise.all(processes.map((p) => p.stop()));
  await facade?.stop();
  await nc?.close();
  await removeNatsPrefixes(NATS_URL, [prefix]).catch((err) => console.error(`could not remove the NATS objects of ${prefix}: ${err.message}`));
  if (process.env.SLUICE_TEST_KEEP) console.log(`kept ${dir}`);
  else await rm(dir, { recursive: true, force: true });
}, 60_000);

/** The webhook calls about the rule answered 2xx, by webhook-id. */
function deliveredAbout(name: string): Map<string, WebhookCall[]> {
  const ids = new Map<string, WebhookCall[]>();
  for (const call of hook!.calls) {
    if (!call.body.includes(name) || typeof call.answer !== 'number' || call.answer >= 300) continue;
    const id = String(call.headers['webhook-id']);
    ids.set(id, [...(ids.get(id) ?? []), call]);
  }
  return ids;
}

const subjectOf = (call: WebhookCall): string => JSON.parse(call.body).data.subject;

describe('cluster: the alert evaluator\'s process killed', () => {
  it('another gateway takes the lease over and resolves the alert, with no notification lost or repeated', async () => {
    await start('consume', 'consume');
    await start('deliver', 'deliver');
    const gateways = [await start('gateway', 'gateway-1'), await start('gateway', 'gateway-2')];

    const relay = new RelayClient(() => gateways[0]!, OPERATOR_TOKEN);
    const owner = await relay.onboard();
    const { site, form } = await relay.form({ hook: hook! });
    const consoleOf = async (gateway: SluiceProcess) => {
      const client = new ConsoleClient(`http://127.0.0.1:${consolePorts.get(gateway)}`);
      await client.signIn(owner.email, owner.password);
      return client;
    };
    const console1 = await consoleOf(gateways[0]!);
    const { key } = await console1.json<{ key: { apiKey: string } }>('/api/sources', { method: 'POST', body: { name: 'checkout' } });
    const send = (gateway: SluiceProcess, count: number, errors: number) => sendSpans({ baseUrl: gateway.baseUrl, apiKey: key.apiKey }, 'checkout', count, errors);

    const name = 'Checkout failing in the cluster';
    const created = await console1.json<any>('/api/alerts/rules', {
      method: 'POST',
      body: {
        name, condition: { kind: 'error_rate', service: 'checkout' }, comparator: 'above', threshold: 0.5, windowSeconds: 300, forSeconds: 0,
        noData: 'keep', labels: {}, notify: { siteId: site.id, formId: form.id }, repeatSeconds: 0, enabled: true,
      },
    });

    // 8 of 10 spans failed: the rule fires, and its webhook is delivered.
    await send(gateways[0]!, 10, 8);
    await eventually(() => deliveredAbout(name).size === 1, WAIT_MS, 250);
    expect([...deliveredAbout(name).values()].map((calls) => subjectOf(calls[0]!))).toEqual([`[FIRING] ${name}`]);

    // Kill the process holding the evaluator's lease.
    const store = new NatsKvStateStore(nc!, { bucketPrefix: `${prefix.toLowerCase()}_` });
    const holderPid = async () => Number(String((await store.get<{ holder: string }>('leases', 'alert evaluator'))?.holder ?? '').split('/')[1]);
    const pid = await holderPid();
    const holder = gateways.find((gateway) => gateway.child.pid === pid);
    expect(holder, `the lease names pid ${pid}`).toBeDefined();
    await holder!.stop('SIGKILL');
    const survivor = gateways.find((gateway) => gateway !== holder)!;

    // 8 of 50: under the threshold. The survivor takes the lease once it lapses and resolves.
    await send(survivor, 40, 0);
    await eventually(() => deliveredAbout(name).size === 2, WAIT_MS, 250);
    expect(await holderPid()).toBe(survivor.child.pid);
    const survivorConsole = await consoleOf(survivor);
    const { status } = await survivorConsole.json<any>(`/api/alerts/rules/${created.rule.id}`);
    expect(status.state).toBe('ok');
    expect(status.history.map((t: any) => t.kind)).toEqual(['firing', 'resolved']);

    // Two rounds more: nothing else arrives, and each notification was delivered once.
    await new Promise((resolve) => setTimeout(resolve, 2 * INTERVAL_SECONDS * 1000 + 1000));
    const delivered = deliveredAbout(name);
    expect([...delivered.values()].map((calls) => subjectOf(calls[0]!))).toEqual([`[FIRING] ${name}`, `[RESOLVED] ${name}`]);
    expect([...delivered.values()].map((calls) => calls.length)).toEqual([1, 1]);
    for (const calls of delivered.values()) expect(calls[0]!.verified).toBe(true);
  }, 300_000);
});
