/**
 * The bench runner: starts each target as its own process, drives it with autocannon from this
 * process, samples the target's CPU time around the measured run, checks that what was
 * acknowledged was stored, and writes a report to bench/results/.
 *
 * usage: tsx bench/run.ts [--scenario otlp-http-protobuf-gzip] [--targets sluice,sluice-node,naive]
 *                         [--duration 20] [--warmup 3] [--connections 32] [--delivery-timeout 120]
 */
import { loadConfig } from '../core/config.ts';
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import autocannon, { type Result } from 'autocannon';
import { agentLogBodies, loadTraceTypes, traceBodies } from './payload.ts';
import { cpuSeconds, machineBusySeconds, startTarget, TARGETS, type RunningTarget, type TargetName } from './target.ts';
import { startBenchWebhookReceiver, type BenchWebhookReceiver } from './webhook-receiver.ts';

/** A request mix: the same for every target. */
interface Scenario {
  path: string;
  /** Which port takes it: OTLP/agent ingestion (default) or the relay. */
  port?: 'ingest' | 'relay';
  headers: Record<string, string>;
  bodies: Buffer[];
  /** Configures the target before the run (relay tenants, sites...): returns the bodies and headers to send. */
  prepare?: (target: RunningTarget, receiver?: BenchWebhookReceiver) => Promise<{ bodies: Buffer[]; headers: Record<string, string> }>;
  /** Added to the target's environment. */
  env?: Record<string, string>;
  /** Done when the webhook arrives, not when stored: run by measureWebhooks, with a receiver. */
  webhooks?: boolean;
  /** Headers made per request (an Idempotency-Key each). */
  perRequestHeaders?: (n: number) => Record<string, string>;
  /** CPU is reported per this many items: a million spans, a thousand submissions. */
  cpuPer?: number;
  /** Spans (or log entries) carried by one request. */
  itemsPerRequest: number;
  /** What an item is, for the report: spans, entries. */
  unit: string;
  /** The table the items land in, counted to verify the run. */
  table: string;
  /** Targets that speak this scenario's API (default: all). */
  targets?: readonly TargetName[];
  /** Why the others are skipped (default: they lack the endpoint). */
  skipReason?: string;
  description: string;
}

const SCENARIOS: Record<string, () => Scenario> = {
  'otlp-http-protobuf-gzip': () => {
    const payload = traceBodies(loadTraceTypes(), 64, 100);
    return {
      path: '/v1/traces',
      headers: { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' },
      bodies: payload.bodies,
      itemsPerRequest: payload.spansPerRequest,
      unit: 'spans',
      table: 'otel_traces',
      description:
        `OTLP/HTTP POST /v1/traces, protobuf + gzip, ${payload.spansPerRequest} spans × 20 attributes per request, ` +
        `${payload.bodies.length} distinct bodies, ${(payload.rawBytes / 1024).toFixed(1)} KB raw / ` +
        `${(payload.gzipBytes / 1024).toFixed(1)} KB gzip each`,
    };
  },
  'relay-submissions': () => ({
    path: '/api/v1/submissions',
    port: 'relay',
    headers: { 'content-type': 'application/json', origin: BENCH_ORIGIN },
    bodies: [],
    prepare: async (target) => {
      const { site } = await relaySite(target);
      return { bodies: relayBodies((i) => ({ siteKey: site.siteKey, formKey: 'contact', captchaToken: 'no-captcha', data: formData(i) })), headers: {} };
    },
    itemsPerRequest: 1,
    unit: 'submissions',
    table: 'relay_submissions',
    cpuPer: 1000,
    targets: ['sluice', 'sluice-node'],
    description: 'relay POST /api/v1/submissions from an allowed Origin, no CAPTCHA, a contact form of 5 fields (~0.6 KB JSON); each stored with 3 delivery jobs (2 recipients, 1 webhook)',
  }),
  'relay-webhooks': () => ({
    path: '/api/v1/submissions',
    port: 'relay',
    headers: { 'content-type': 'application/json', origin: BENCH_ORIGIN },
    bodies: [],
    // The receiver listens on loopback, which the webhook egress policy refuses by default.
    env: { SLUICE_WEBHOOK_ALLOW: '127.0.0.1/32' },
    prepare: async (target, receiver) => {
      const { site } = await relaySite(target, receiver);
      return { bodies: relayBodies((i) => ({ siteKey: site.siteKey, formKey: 'contact', captchaToken: 'no-captcha', data: formData(i) })), headers: {} };
    },
    webhooks: true,
    itemsPerRequest: 1,
    unit: 'webhooks',
    table: 'relay_submissions',
    cpuPer: 1000,
    targets: ['sluice'],
    skipReason: 'delivery works the same on either HTTP engine (relay-submissions compares the engines) and naive has no relay',
    description:
      'relay POST /api/v1/submissions as in relay-submissions, to a form whose only destination is one webhook to a receiver in the runner process, ' +
      `signed (Standard Webhooks) and POSTed by the server's delivery workers (SLUICE_DELIVERY_CONCURRENCY ${process.env.SLUICE_DELIVERY_CONCURRENCY ?? loadConfig({}).delivery.concurrency})`,
  }),
  'relay-notifications': () => ({
    path: '/api/v1/notifications',
    port: 'relay',
    headers: { 'content-type': 'application/json' },
    bodies: [],
    prepare: async (target) => {
      const { site, apiKey } = await relaySite(target);
      const body = (i: number) => ({
        siteKey: site.siteKey,
        formKey: 'contact',
        recipients: { email: ['sales@bench.example'] },
        subject: `Order ${i} shipped`,
        body: `<p>Hello,</p><p>order <b>${i}</b> is on its way: <a href="https://shop.bench.example/o/${i}">track it</a>.</p>`,
        data: { order: i, total: 42.5, items: ['tea', 'cups'] },
      });
      return { bodies: relayBodies(body), headers: { 'x-api-key': apiKey } };
    },
    // Never the same key twice in a bench process (warm-up and run included): a repeat would be a replay, not stored.
    perRequestHeaders: () => ({ 'idempotency-key': `bench-${process.pid}-${++idempotencyKeys}` }),
    itemsPerRequest: 1,
    unit: 'notifications',
    table: 'relay_submissions',
    cpuPer: 1000,
    targets: ['sluice', 'sluice-node'],
    description: 'relay POST /api/v1/notifications with an API key and a fresh Idempotency-Key per request, one named recipient, subject and HTML body sanitised (~0.4 KB JSON); each stored with 1 delivery job',
  }),
  'agent-log-json-gzip': () => {
    const payload = agentLogBodies(64, 1000);
    return {
      path: '/api/v1/ingest',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      bodies: payload.bodies,
      itemsPerRequest: payload.entriesPerRequest,
      unit: 'entries',
      table: 'agent_logs',
      // The naive receiver speaks OTLP traces only.
      targets: ['sluice', 'sluice-node'],
      description:
        `agent API POST /api/v1/ingest, JSON + gzip, ${payload.entriesPerRequest} log entries × 5 attributes per request, ` +
        `${payload.bodies.length} distinct bodies, ${(payload.rawBytes / 1024).toFixed(1)} KB JSON / ` +
        `${(payload.gzipBytes / 1024).toFixed(1)} KB gzip each`,
    };
  },
};

interface Options {
  scenario: string;
  targets: TargetName[];
  duration: number;
  warmup: number;
  connections: number;
  /** relay-webhooks: seconds to wait for the last webhooks after the load. */
  deliveryTimeout: number;
}

function options(): Options {
  const { values } = parseArgs({
    options: {
      scenario: { type: 'string', default: 'otlp-http-protobuf-gzip' },
      targets: { type: 'string', default: TARGETS.join(',') },
      duration: { type: 'string', default: process.env.BENCH_DURATION ?? '20' },
      warmup: { type: 'string', default: process.env.BENCH_WARMUP ?? '3' },
      connections: { type: 'string', default: '32' },
      'delivery-timeout': { type: 'string', default: '120' },
    },
    strict: true,
  });
  const targets = values.targets.split(',').map((t) => t.trim()) as TargetName[];
  const unknown = targets.filter((t) => !TARGETS.includes(t));
  if (unknown.length) throw new Error(`unknown target ${unknown.join(', ')} (known: ${TARGETS.join(', ')})`);
  if (!SCENARIOS[values.scenario]) throw new Error(`unknown scenario ${values.scenario} (known: ${Object.keys(SCENARIOS).join(', ')})`);
  const positive = (name: string, v: string, min: number) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number ≥ ${min}`);
    return n;
  };
  return {
    scenario: values.scenario,
    targets,
    duration: positive('duration', values.duration, 1),
    warmup: positive('warmup', values.warmup, 0),
    connections: positive('connections', values.connections, 1),
    deliveryTimeout: positive('delivery-timeout', values['delivery-timeout'], 1),
  };
}

const BENCH_ORIGIN = 'https://www.bench.example';
let idempotencyKeys = 0;

/**
 * A relay tenant with a site (allowing BENCH_ORIGIN), a form `contact` with two recipients and a
 * webhook, and an API key. With a receiver, the webhook goes to it and is the form's only
 * destination (no SMTP server takes the emails), and the receiver gets its secret.
 */
async function relaySite(target: RunningTarget, receiver?: BenchWebhookReceiver): Promise<{ site: { id: string; siteKey: string }; apiKey: string }> {
  const { tenant } = (await target.cli('relay', 'onboard', '--tenant', 'Bench', '--owner', 'owner@bench.example')) as { tenant: { id: string } };
  const site = (await target.cli('relay', 'sites', 'create', '--tenant', tenant.id, '--name', 'Bench', '--origin', BENCH_ORIGIN)) as { id: string; siteKey: string };
  const form = (await target.cli('relay', 'forms', 'create', '--site', site.id, '--name', 'Contact', '--key', 'contact')) as { id: string };
  for (const address of receiver ? [] : ['sales@bench.example', 'support@bench.example']) {
    await target.cli('relay', 'recipients', 'add', '--site', site.id, '--form', form.id, '--channel', 'email', '--address', address);
  }
  const hook = (await target.cli('relay', 'webhooks', 'add', '--site', site.id, '--form', form.id, '--url', receiver?.url ?? 'https://hooks.bench.example/forms')) as { secret: string };
  receiver?.useSecret(hook.secret);
  const { apiKey } = (await target.cli('relay', 'api-keys', 'create', '--site', site.id, '--name', 'bench')) as { apiKey: string };
  return { site, apiKey };
}

function relayBodies(make: (i: number) => unknown): Buffer[] {
  return Array.from({ length: 64 }, (_, i) => Buffer.from(JSON.stringify(make(i))));
}

function formData(i: number): Record<string, string> {
  return {
    name: `Visitor ${i}`,
    email: `visitor${i}@mail.bench.example`,
    company: 'Example GmbH',
    subject: 'Question about pricing',
    message: `Hello, we are ${10 + i} people and would like to know more about the team plan. `.repeat(5),
  };
}

/** Drives the target for `duration` seconds, rotating through the scenario's bodies; `accepted` collects the ids of 201 answers. */
function load(target: RunningTarget, scenario: Scenario, duration: number, connections: number, accepted?: string[]): Promise<Result> {
  let next = 0;
  return autocannon({
    url: (scenario.port === 'relay' ? target.relayUrl : target.url) + scenario.path,
    method: 'POST',
    headers: { ...scenario.headers, ...target.headers },
    connections,
    duration,
    requests: [{
      setupRequest: (req) => {
        const n = next++;
        const extra = scenario.perRequestHeaders?.(n);
        return { ...req, body: scenario.bodies[n % scenario.bodies.length], ...(extra ? { headers: { ...req.headers, ...extra } } : {}) };
      },
      ...(accepted ? {
        onResponse: (status: number, body: string) => {
          if (status === 201) accepted.push((JSON.parse(body) as { submissionId: string }).submissionId);
        },
      } : {}),
    }],
  });
}

/** Reads the stored count until it stops changing: cut-off requests may still be committing. */
async function settledCount(target: RunningTarget, table: string): Promise<number> {
  let last = -1;
  for (let i = 0; i < 40; i++) {
    const count = await target.countRows(table);
    if (count === last) return count;
    last = count;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return last;
}

interface Row {
  target: string;
  reqPerSec: number;
  itemsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** non-2xx responses plus socket errors and timeouts. */
  errors: number;
  statusCodes: Record<string, number>;
  /** Server CPU (user + system, all threads) per Scenario.cpuPer (a million, or a thousand) acknowledged items. */
  cpuSecondsPerItems: number;
  /** Server CPU seconds / wall seconds: how many cores it kept busy. */
  serverCores: number;
  /** This process (autocannon) CPU seconds / wall seconds. */
  loadgenCores: number;
  /** Every other process on the machine: above ~0.1 the figures are disturbed. */
  otherCores: number;
  /** Items acknowledged with 2xx (warm-up included) and items the target says it stored. */
  acknowledgedItems: number;
  storedItems: number;
  verified: boolean;
  /** relay-webhooks only. */
  webhooks?: WebhookFigures;
  error?: string;
}

async function measure(name: TargetName, scenarioOf: Scenario, opts: Options): Promise<Row> {
  let scenario = scenarioOf;
  const log = (msg: string) => process.stderr.write(`[${name}] ${msg}\n`);
  const target = await startTarget(name, scenario.env);
  try {
    if (scenario.prepare) {
      const prepared = await scenario.prepare(target);
      scenario = { ...scenario, bodies: prepared.bodies };
      target.headers = { ...target.headers, ...prepared.headers };
    }
    log(`pid ${target.pid} at ${target.url}; warm-up ${opts.warmup} s, then ${opts.duration} s × ${opts.connections} connections`);
    const warm = opts.warmup > 0 ? await load(target, scenario, opts.warmup, opts.connections) : undefined;

    const cpu0 = cpuSeconds(target.pid);
    const ours0 = process.cpuUsage();
    const machine0 = machineBusySeconds();
    const result = await load(target, scenario, opts.duration, opts.connections);
    const cpu = cpuSeconds(target.pid) - cpu0;
    const ours = process.cpuUsage(ours0);
    const machine = machineBusySeconds() - machine0;
    const loadgen = (ours.user + ours.system) / 1e6;

    const ok = result['2xx'];
    const items = ok * scenario.itemsPerRequest;
    const acknowledgedItems = ((warm?.['2xx'] ?? 0) + ok) * scenario.itemsPerRequest;
    const storedItems = await settledCount(target, scenario.table);
    // Requests cut off when a run ends may be stored without being acknowledged: at most one
    // in flight per connection, per run.
    const slack = 2 * opts.connections * scenario.itemsPerRequest;
    const verified = storedItems >= acknowledgedItems && storedItems <= acknowledgedItems + slack;
    log(`${ok} requests 2xx, ${storedItems} ${scenario.unit} stored for ${acknowledgedItems} acknowledged: ${verified ? 'ok' : 'MISMATCH'}`);
    return {
      target: name,
      reqPerSec: result.requests.total / result.duration,
      itemsPerSec: items / result.duration,
      p50Ms: result.latency.p50,
      p99Ms: result.latency.p99,
      errors: result.non2xx + result.errors,
      statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count])),
      cpuSecondsPerItems: items ? cpu / (items / (scenario.cpuPer ?? 1e6)) : NaN,
      serverCores: cpu / result.duration,
      loadgenCores: loadgen / result.duration,
      otherCores: Math.max(0, machine - cpu - loadgen) / result.duration,
      acknowledgedItems,
      storedItems,
      verified,
    };
  } finally {
    await target.stop();
  }
}

interface WebhookFigures {
  /** Submissions answered 201 per second of load. */
  acceptedPerSec: number;
  /** Webhooks of the measured run received per second, from the load's start to the last one. */
  deliveredPerSec: number;
  /** Seconds from the end of the load to the last webhook. */
  tailSeconds: number;
  /** Submission (its receivedAt) to webhook received, over the measured run's submissions. */
  p50Ms: number;
  p99Ms: number;
  /** Accepted submissions (warm-up included) whose webhook did not arrive by the deadline, and a few of their ids. */
  missing: number;
  missingIds: string[];
  /** Webhooks for submissions never answered (requests cut off when a load ended). */
  unacknowledged: number;
  /** Calls repeating a webhook-id already received. */
  repeats: number;
  signaturesChecked: number;
  badSignatures: number;
}

function quantile(sorted: number[], q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN;
}

/** The latest state of every delivery job, as the server's history has it (queued = no attempt yet). */
async function jobStates(target: RunningTarget): Promise<unknown> {
  return target.cli('query', `SELECT (SELECT count() FROM otel.relay_delivery_jobs) AS jobs, countIf(s = 'sending') AS sending,
    countIf(s = 'delivered') AS delivered, countIf(s = 'failed') AS failed, countIf(s = 'dead') AS dead
    FROM (SELECT argMax(State, (Series, Attempt, At)) AS s FROM otel.relay_delivery_attempts GROUP BY JobId)`);
}

/**
 * relay-webhooks: the load of relay-submissions, then the wait for every accepted submission's
 * webhook. The warm-up's webhooks are awaited before the measured run starts, so its window —
 * from the load's start to the last webhook — holds its own deliveries only; the server's CPU is
 * read at both ends of that window.
 */
async function measureWebhooks(name: TargetName, scenarioOf: Scenario, opts: Options): Promise<Row> {
  const log = (msg: string) => process.stderr.write(`[${name}] ${msg}\n`);
  const receiver = await startBenchWebhookReceiver();
  const target = await startTarget(name, scenarioOf.env);
  try {
    const scenario = { ...scenarioOf, bodies: (await scenarioOf.prepare!(target, receiver)).bodies };
    const timeoutMs = opts.deliveryTimeout * 1000;
    log(`pid ${target.pid} at ${target.relayUrl}, webhooks to ${receiver.url}; warm-up ${opts.warmup} s, then ${opts.duration} s × ${opts.connections} connections`);
    const warmIds: string[] = [];
    const warm = opts.warmup > 0 ? await load(target, scenario, opts.warmup, opts.connections, warmIds) : undefined;
    const warmMissing = await receiver.waitFor(warmIds, timeoutMs);
    if (warmMissing.length) throw new Error(`${warmMissing.length} of the warm-up's ${warmIds.length} webhooks missing after ${opts.deliveryTimeout} s: ${JSON.stringify(await jobStates(target))}`);
    const deliveredBefore = receiver.delivered.size;

    const ids: string[] = [];
    const cpu0 = cpuSeconds(target.pid);
    const ours0 = process.cpuUsage();
    const machine0 = machineBusySeconds();
    const start = Date.now();
    const result = await load(target, scenario, opts.duration, opts.connections, ids);
    const loadEnd = Date.now();
    const missing = await receiver.waitFor(ids, timeoutMs);
    const cpu = cpuSeconds(target.pid) - cpu0;
    const ours = process.cpuUsage(ours0);
    const machine = machineBusySeconds() - machine0;
    const loadgen = (ours.user + ours.system) / 1e6;
    // Complete: the window ends with the last webhook (CPU was read within one 50 ms poll of it).
    const window = ((missing.length ? Date.now() : receiver.lastAt) - start) / 1000;
    const [deliveredAll, lastAt] = [receiver.delivered.size, receiver.lastAt];

    const delivered = deliveredAll - deliveredBefore;
    const latencies = ids.flatMap((id) => receiver.delivered.get(id) ?? []).sort((a, b) => a - b);
    const acknowledged = warmIds.length + ids.length;
    const unacknowledged = deliveredAll - (acknowledged - missing.length);
    // A request cut off when a load ends (one per connection) may be stored and delivered without an answer.
    const unanswered = [warm, result].reduce((sum, r) => sum + (r ? r.requests.sent - r.requests.total : 0), 0);
    const verified = missing.length === 0 && unacknowledged <= unanswered && receiver.badSignatures === 0;
    log(`${ids.length} submissions accepted, ${delivered} webhooks received, last one ${((lastAt - loadEnd) / 1000).toFixed(1)} s after the load; ` +
      `${receiver.checked} signatures checked, ${receiver.badSignatures} bad; ${receiver.repeats} repeated webhook-ids; ${unacknowledged} for the ${unanswered} requests cut off unanswered: ${verified ? 'ok' : 'MISMATCH'}`);
    if (missing.length) log(`${missing.length} webhooks missing after ${opts.deliveryTimeout} s, e.g. submissions ${missing.slice(0, 5).join(', ')}; the server's jobs: ${JSON.stringify(await jobStates(target))}`);
    return {
      target: name,
      reqPerSec: result.requests.total / result.duration,
      itemsPerSec: delivered / window,
      p50Ms: result.latency.p50,
      p99Ms: result.latency.p99,
      errors: result.non2xx + result.errors,
      statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count])),
      cpuSecondsPerItems: delivered ? cpu / (delivered / 1000) : NaN,
      serverCores: cpu / window,
      loadgenCores: loadgen / window,
      otherCores: Math.max(0, machine - cpu - loadgen) / window,
      acknowledgedItems: acknowledged,
      storedItems: deliveredAll,
      verified,
      webhooks: {
        acceptedPerSec: ids.length / result.duration,
        deliveredPerSec: delivered / window,
        tailSeconds: (lastAt - loadEnd) / 1000,
        p50Ms: quantile(latencies, 0.5),
        p99Ms: quantile(latencies, 0.99),
        missing: missing.length,
        missingIds: missing.slice(0, 20),
        unacknowledged,
        repeats: receiver.repeats,
        signaturesChecked: receiver.checked,
        badSignatures: receiver.badSignatures,
      },
    };
  } finally {
    await target.stop();
    await receiver.close();
  }
}

const fixed = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : '–');

function markdown(scenario: string, { description, unit, cpuPer, webhooks }: Scenario, opts: Options, rows: Row[]): string {
  if (webhooks) return webhookMarkdown(scenario, description, opts, rows);
  const per = (cpuPer ?? 1e6) === 1e6 ? 'M' : 'k';
  const lines = [
    `## ${scenario}`,
    '',
    `${description}. autocannon, ${opts.connections} connections, ${opts.duration} s per target after ${opts.warmup} s warm-up; ` +
      `${availableParallelism()} cores shared by load generator and server; Node ${process.version}.`,
    '',
    `| target | req/s | ${unit}/s | p50 ms | p99 ms | errors | CPU-s / ${per} ${unit} | server cores | load-gen cores | other cores | stored = acked |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const r of rows) {
    if (r.error) {
      lines.push(`| ${r.target} | failed: ${r.error.split('\n')[0]} | | | | | | | | | |`);
      continue;
    }
    lines.push(
      `| ${r.target} | ${fixed(r.reqPerSec)} | ${fixed(r.itemsPerSec)} | ${fixed(r.p50Ms)} | ${fixed(r.p99Ms)} | ${r.errors} | ` +
        `${fixed(r.cpuSecondsPerItems, per === 'k' ? 3 : 2)} | ${fixed(r.serverCores, 2)} | ${fixed(r.loadgenCores, 2)} | ${fixed(r.otherCores, 2)} | ${r.verified ? 'yes' : `NO (${r.storedItems} / ${r.acknowledgedItems})`} |`,
    );
  }
  if (rows.some((r) => r.otherCores > 0.1)) {
    lines.push('', '**Other processes used CPU during the run** (other cores > 0.1): throughput and latency are disturbed.');
  }
  const naive = rows.find((r) => r.target === 'naive' && !r.error);
  const ratios = rows.filter((r) => r.target !== 'naive' && !r.error && naive);
  if (ratios.length) lines.push('');
  for (const r of ratios) {
    const ratio = naive!.cpuSecondsPerItems / r.cpuSecondsPerItems;
    lines.push(`- ${r.target}: ${fixed(ratio, 2)}× the ${unit} per CPU-second of naive, ${fixed(r.itemsPerSec / naive!.itemsPerSec, 2)}× its ${unit}/s.`);
  }
  return lines.join('\n') + '\n';
}

function webhookMarkdown(scenario: string, description: string, opts: Options, rows: Row[]): string {
  const lines = [
    `## ${scenario}`,
    '',
    `${description}. autocannon, ${opts.connections} connections, ${opts.duration} s of load per target after ${opts.warmup} s warm-up ` +
      `(whose webhooks are awaited first); ${availableParallelism()} cores shared by load generator, receiver and server; Node ${process.version}.`,
    '',
    '| target | submissions/s | webhooks/s | delivery p50 ms | delivery p99 ms | errors | CPU-s / k webhooks | server cores | runner cores | other cores | delivered = accepted |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const r of rows) {
    const w = r.webhooks;
    if (r.error || !w) {
      lines.push(`| ${r.target} | failed: ${r.error?.split('\n')[0]} | | | | | | | | | |`);
      continue;
    }
    lines.push(
      `| ${r.target} | ${fixed(w.acceptedPerSec)} | ${fixed(w.deliveredPerSec)} | ${fixed(w.p50Ms)} | ${fixed(w.p99Ms)} | ${r.errors} | ${fixed(r.cpuSecondsPerItems, 3)} | ` +
        `${fixed(r.serverCores, 2)} | ${fixed(r.loadgenCores, 2)} | ${fixed(r.otherCores, 2)} | ${r.verified ? 'yes' : `NO (${w.missing} missing)`} |`,
    );
  }
  lines.push('');
  for (const r of rows.filter((row) => row.webhooks)) {
    const w = r.webhooks!;
    lines.push(
      `- ${r.target}: submit p50 ${fixed(r.p50Ms)} ms, p99 ${fixed(r.p99Ms)} ms; last webhook ${fixed(w.tailSeconds, 1)} s after the load; ` +
        `${r.storedItems} webhooks for ${r.acknowledgedItems} accepted submissions (warm-up included), ${w.unacknowledged} of them for requests cut off unanswered; ` +
        `${w.repeats} repeated webhook-ids; ${w.signaturesChecked} signatures checked, ${w.badSignatures} bad.`,
    );
  }
  if (rows.some((r) => r.otherCores > 0.1)) {
    lines.push('', '**Other processes used CPU during the run** (other cores > 0.1): throughput and latency are disturbed.');
  }
  return lines.join('\n') + '\n';
}

async function main(): Promise<void> {
  const opts = options();
  const scenario = SCENARIOS[opts.scenario]!();
  process.stderr.write(`${opts.scenario}: ${scenario.description}\n`);

  const rows: Row[] = [];
  const unsupported = opts.targets.filter((name) => scenario.targets && !scenario.targets.includes(name));
  if (unsupported.length) process.stderr.write(`skipping ${unsupported.join(', ')}: ${scenario.skipReason ?? `no ${scenario.path} endpoint`}\n`);
  for (const name of opts.targets.filter((t) => !unsupported.includes(t))) {
    try {
      rows.push(await (scenario.webhooks ? measureWebhooks : measure)(name, scenario, opts));
    } catch (err) {
      process.stderr.write(`[${name}] failed: ${(err as Error).message}\n`);
      rows.push({ target: name, error: (err as Error).message } as Row);
    }
  }

  const md = markdown(opts.scenario, scenario, opts, rows);
  process.stdout.write('\n' + md);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const dir = new URL('results/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  const report = { scenario: opts.scenario, description: scenario.description, date: new Date().toISOString(), node: process.version, cores: availableParallelism(), options: opts, rows };
  writeFileSync(new URL(`${stamp}.json`, dir), JSON.stringify(report, null, 2) + '\n');
  writeFileSync(new URL(`${stamp}.md`, dir), md);
  process.stderr.write(`report: bench/results/${stamp}.{json,md}\n`);
  if (rows.some((r) => r.error || !r.verified)) process.exitCode = 1;
}

await main();
