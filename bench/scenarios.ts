/**
 * The bench's scenarios: request mixes, the same for every target, and what each one counts
 * (spans, log entries, submissions), in which table.
 */
import { loadConfig } from '../core/config.ts';
import { agentLogBodies, loadTraceTypes, traceBodies } from './payload.ts';
import type { RunningTarget, TargetName } from './target.ts';
import type { BenchWebhookReceiver } from './webhook-receiver.ts';

/** A request mix: the same for every target. */
export interface Scenario {
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

export const SCENARIOS: Record<string, () => Scenario> = {
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
    targets: ['sluice', 'sluice-uws'],
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
    targets: ['sluice', 'sluice-uws'],
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
      targets: ['sluice', 'sluice-uws', 'cluster-gateway', 'cluster-consumer', 'cluster'],
      description:
        `agent API POST /api/v1/ingest, JSON + gzip, ${payload.entriesPerRequest} log entries × 5 attributes per request, ` +
        `${payload.bodies.length} distinct bodies, ${(payload.rawBytes / 1024).toFixed(1)} KB JSON / ` +
        `${(payload.gzipBytes / 1024).toFixed(1)} KB gzip each`,
    };
  },
};

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