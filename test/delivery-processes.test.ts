/**
 * Delivery faults at process level, with exact counts: real `node bin/sluice.mjs <role>` OS
 * processes killed with SIGKILL, real peers (an SMTP server, webhook receivers verifying with
 * `standardwebhooks`) in this test process, on loopback.
 *
 * Embedded default (`sluice serve`, the process `npm start` runs; the queue is a write-ahead log
 * in its data dir):
 *   1. killed while 2N jobs wait for their next attempt (the SMTP server down, the receiver
 *      answering 503 until after the restart, so nothing can have been delivered before the
 *      kill), restarted on the same data dir: every job delivered, each message exactly once;
 *   2. killed while its attempts hang (the receiver holds the requests open), restarted: each job
 *      is tried again as attempt 2 (the admin API shows it) and delivered once.
 * Cluster (`sluice gateway` with the relay, `sluice consume`, two `sluice deliver` on the real
 * nats-server, NATS_URL, default nats://127.0.0.1:4222, under a prefix of this run's own):
 *   3. N submissions' webhooks delivered exactly once across the two workers; then a worker
 *      killed while it holds an attempt: after the ack wait JetStream hands the job to the other.
 *      Job history lives in the consumer's own chDB there, so the receiver's view is asserted.
 * Each process logs to <name>.log in a temp dir sluice-delivery-processes-… (SLUICE_TEST_KEEP=1
 * keeps it, SLUICE_TEST_LOG_LEVEL sets the level, default warn).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DELIVERY_DURABLE, deliveryStreamOf } from '../bus/jetstream-names.ts';
import { startSmtpInbox, startWebhookReceiver, type SmtpInbox, type WebhookCall, type WebhookReceiver } from './delivery-peers.ts';
import { connectNats, eventually, removeNatsPrefixes } from './harness.ts';
import { RelayClient } from './relay-client.ts';
import { startSluiceProcess, type SluiceProcess, type SluiceRole } from './sluice-processes.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const prefix = `D${randomBytes(4).toString('hex').toUpperCase()}`;
const OPERATOR_TOKEN = `op_${randomBytes(12).toString('hex')}`;
/** Cluster: a killed worker's job comes back after this (the default is 60 s). */
const ACK_WAIT_SECONDS = 5;
/** Deadline of every wait: generous, for a loaded 2-core CI machine. */
const WAIT_MS = 45_000;

/** What every process gets: loopback receivers allowed, fast retries that never run out in a test. */
const COMMON_ENV: Record<string, string> = {
  SLUICE_RELAY_OPERATOR_TOKEN: OPERATOR_TOKEN,
  SLUICE_RELAY_ALLOW_PRIVATE_WEBHOOKS: 'true',
  SLUICE_TRUSTED_PROXIES: '127.0.0.1',
  SLUICE_RELAY_SUBMISSIONS_PER_MINUTE: '10000',
  SLUICE_DELIVERY_ATTEMPTS: '100',
  SLUICE_DELIVERY_BACKOFF_BASE_MS: '200',
  SLUICE_DELIVERY_BACKOFF_MAX_MS: '1000',
  // A held request stays held until the test kills its sender, never timed out first.
  SLUICE_WEBHOOK_TIMEOUT_MS: '120000',
  SLUICE_WORKERS: '1',
};

let dir: string;
const processes: SluiceProcess[] = [];
const receivers: WebhookReceiver[] = [];
let smtp: SmtpInbox | undefined;
let nc: NatsConnection | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-delivery-processes-'));
});

afterAll(async () => {
  // Receivers first: a held request is let go, so no process waits on it while stopping.
  for (const receiver of receivers) await receiver.close();
  await Promise.all(processes.map((p) => p.stop()));
  await smtp?.stop();
  await nc?.close();
  await removeNatsPrefixes(NATS_URL, [prefix]).catch((err) => console.error(`could not remove the NATS objects of ${prefix}: ${err.message}`));
  // SLUICE_TEST_KEEP=1 keeps the processes' logs and data dirs.
  if (process.env.SLUICE_TEST_KEEP) console.log(`kept ${dir}`);
  else await rm(dir, { recursive: true, force: true });
}, 60_000);

async function start(role: SluiceRole, name: string, env: Record<string, string>, dataDir?: string): Promise<SluiceProcess> {
  const running = await startSluiceProcess(role, name, dir, { ...COMMON_ENV, ...env }, dataDir ? { dataDir } : {});
  processes.push(running);
  return running;
}

async function receiver(): Promise<WebhookReceiver> {
  const started = await startWebhookReceiver();
  receivers.push(started);
  return started;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The calls of each webhook-id, in order. */
function byWebhookId(calls: readonly WebhookCall[]): Map<string, WebhookCall[]> {
  const ids = new Map<string, WebhookCall[]>();
  for (const call of calls) {
    const id = String(call.headers['webhook-id']);
    ids.set(id, [...(ids.get(id) ?? []), call]);
  }
  return ids;
}

/** Calls the receiver answered 2xx: deliveries. */
function delivered(calls: readonly WebhookCall[]): WebhookCall[] {
  return calls.filter((call) => typeof call.answer === 'number' && call.answer >= 200 && call.answer < 300);
}

function submissionOf(call: WebhookCall): string {
  return JSON.parse(call.body).data.submissionId;
}

/** A sample of the process's /metrics; undefined when it has none. */
async function metric(running: SluiceProcess, sample: string): Promise<number | undefined> {
  const text = await running.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
  return line ? Number(line.slice(sample.length + 1)) : undefined;
}

const DEPTH = 'sluice_delivery_queue_depth';
const WEBHOOKS_DELIVERED = 'sluice_delivery_attempts_total{channel="webhook",outcome="delivered"}';

describe('embedded default: `sluice serve` killed with SIGKILL and restarted on its data dir', () => {
  let serve: SluiceProcess;
  const relay = new RelayClient(() => serve, OPERATOR_TOKEN);
  const env = () => ({ SLUICE_SMTP_URL: smtp!.url, SLUICE_SMTP_FROM: 'Sluice Relay <relay@sluice.test>' });

  /** SIGKILL, then `sluice serve` again on the same data dir (the same ports are not needed: new ones). */
  async function killAndRestart(): Promise<void> {
    await serve.stop('SIGKILL');
    expect(serve.child.signalCode).toBe('SIGKILL');
    serve = await start('serve', 'serve', env(), serve.dataDir);
  }

  beforeAll(async () => {
    smtp = await startSmtpInbox();
    serve = await start('serve', 'serve', env());
    await relay.onboard();
  }, 60_000);

  it('1. killed while 2N jobs wait for a retry: after the restart each message arrives exactly once', async () => {
    const N = 10;
    const hook = await receiver();
    hook.then = 503;
    await smtp!.stop(); // connection refused: transient, retried
    const { site, form } = await relay.form({ emails: ['ops@acme.test'], hook });
    const submitted: string[] = [];
    for (let n = 0; n < N; n++) submitted.push(await relay.submit(site, form, { n }));

    // Every job attempted and failing (a 503, a refused connection), none delivered: nothing
    // can have been sent before the kill, so any second copy afterwards would be a duplicate.
    await eventually(async () => {
      const listed = await relay.jobs(site, form);
      return listed.length === 2 * N && listed.every((job) => job.attempts >= 1 && (job.state === 'failed' || job.state === 'sending')) && byWebhookId(hook.calls).size === N;
    }, WAIT_MS, 100);
    expect(delivered(hook.calls)).toHaveLength(0);
    expect(smtp!.mails).toHaveLength(0);

    await killAndRestart();
    // The journal gave every job back, and the workers go on retrying (receivers still refusing).
    expect(await metric(serve, DEPTH), 'jobs carried over the restart').toBe(2 * N);
    const callsAtRestart = hook.calls.length;
    await eventually(() => hook.calls.length > callsAtRestart, WAIT_MS, 50);

    hook.then = 200;
    await smtp!.start();
    const final = await eventually(async () => {
      const listed = await relay.jobs(site, form);
      return listed.length === 2 * N && listed.every((job) => job.state === 'delivered') ? listed : undefined;
    }, WAIT_MS, 100);
    await sleep(1500); // a second copy of anything would arrive now
    expect(await metric(serve, DEPTH)).toBe(0);

    const hooks = delivered(hook.calls);
    expect(hooks, 'webhook calls answered 2xx').toHaveLength(N);
    expect(new Set(hooks.map((call) => call.headers['webhook-id'])).size, 'distinct webhook-ids delivered').toBe(N);
    expect(hooks.every((call) => call.verified)).toBe(true);
    expect(hooks.map(submissionOf).sort()).toEqual([...submitted].sort());
    // Every call after the first 2xx of a webhook-id would be a redelivery: there is none.
    for (const [id, calls] of byWebhookId(hook.calls)) expect(calls.findIndex((c) => c.answer === 200), id).toBe(calls.length - 1);

    const mails = smtp!.mails.filter((mail) => mail.rcptTo.includes('ops@acme.test'));
    expect(mails, 'emails received').toHaveLength(N);
    expect(new Set(mails.map((mail) => mail.parsed.messageId)).size, 'distinct Message-IDs').toBe(N);
    expect(smtp!.mails).toHaveLength(N);

    // Each job: attempt numbers kept counting across the restart, one delivery, at its last attempt.
    for (const job of final) {
      const { attempts } = await relay.admin('GET', `/admin/jobs/${job.jobId}`);
      const sending = attempts.filter((a: any) => a.state === 'sending').map((a: any) => a.attempt);
      const deliveries = attempts.filter((a: any) => a.state === 'delivered');
      expect(sending.length, `${job.channel} job ${job.jobId}: attempts across the restart`).toBeGreaterThanOrEqual(2);
      expect(sending.every((attempt: number, i: number) => i === 0 || attempt > sending[i - 1]), `attempt numbers ${sending}`).toBe(true);
      expect(deliveries.map((a: any) => a.attempt)).toEqual([sending.at(-1)]);
    }
  }, 150_000);

  it('2. killed while its attempts hang: each job is attempted again (attempt 2) and delivered once', async () => {
    const N = 3;
    const hook = await receiver();
    hook.answers.push('hold', 'hold', 'hold'); // then 200
    const { site, form } = await relay.form({ hook });
    for (let n = 0; n < N; n++) await relay.submit(site, form, { n });
    await eventually(() => hook.held() === N, WAIT_MS, 50);
    // The start of an attempt is recorded beside its send (delivery/worker.ts), so it may land just after the request.
    const hanging = await eventually(async () => {
      const listed = await relay.jobs(site, form);
      return listed.length === N && listed.every((job) => job.state === 'sending') ? listed : undefined;
    }, WAIT_MS, 100);
    expect(hanging.map((job) => [job.state, job.attempts])).toEqual(Array.from({ length: N }, () => ['sending', 1]));

    await killAndRestart();
    await eventually(() => hook.held() === 0, WAIT_MS, 50); // the held requests closed with their sender
    const final = await eventually(async () => {
      const listed = await relay.jobs(site, form);
      return listed.length === N && listed.every((job) => job.state === 'delivered') ? listed : undefined;
    }, WAIT_MS, 100);
    await sleep(1500);

    for (const job of final) {
      const { attempts } = await relay.admin('GET', `/admin/jobs/${job.jobId}`);
      expect(attempts.map((a: any) => [a.attempt, a.state]), `job ${job.jobId}`).toEqual([[1, 'sending'], [2, 'sending'], [2, 'delivered']]);
    }
    expect(hook.calls, 'calls: one held and one answered per job').toHaveLength(2 * N);
    const ids = byWebhookId(hook.calls);
    expect(ids.size).toBe(N);
    for (const [id, calls] of ids) expect(calls.map((call) => [call.answer, call.verified]), id).toEqual([['held', true], [200, true]]);
  }, 120_000);
});

describe('embedded default: the delivery queue full (SLUICE_DELIVERY_MAX_QUEUE_JOBS=100)', () => {
  let serve: SluiceProcess;
  const relay = new RelayClient(() => serve, OPERATOR_TOKEN);
  const env = { SLUICE_DELIVERY_MAX_QUEUE_JOBS: '100' };

  async function restart(signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
    await serve.stop(signal);
    serve = await start('serve', 'serve-bounded', env, serve.dataDir);
  }

  /** Submissions to `form` until one is refused; the accepted ones' ids. */
  async function fill(site: any, form: any): Promise<{ accepted: string[]; refusal: { status: number; body: any; headers?: unknown } }> {
    const accepted: string[] = [];
    for (let n = 0; n < 200; n++) {
      const reply = await relay.call('POST', '/submissions', { siteKey: site.siteKey, formKey: form.formKey, data: { n } });
      if (reply.status !== 201) return { accepted, refusal: reply };
      accepted.push(reply.body.submissionId);
    }
    throw new Error('the queue took 200 jobs: it has no bound');
  }

  beforeAll(async () => {
    serve = await start('serve', 'serve-bounded', env);
    await relay.onboard();
  }, 60_000);

  afterAll(() => serve?.stop());

  it('4. answers 503 + Retry-After when full; SIGKILL and restart lose nothing it accepted: each job delivered once', async () => {
    const hook = await receiver();
    hook.then = 503;
    const { site, form } = await relay.form({ hook });
    const { accepted, refusal } = await fill(site, form);
    expect(accepted).toHaveLength(100);
    expect(refusal.status).toBe(503);
    const retryAfter = await fetch(`http://127.0.0.1:${serve.relayPort}/api/v1/submissions`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': '198.51.100.200' }, body: JSON.stringify({ siteKey: site.siteKey, formKey: form.formKey, data: {} }),
    });
    expect(retryAfter.status).toBe(503);
    expect(Number(retryAfter.headers.get('retry-after'))).toBeGreaterThan(0);
    const ready = await (await fetch(`${serve.baseUrl}/api/v1/ready`)).json();
    expect(ready.components['delivery.queue']).toMatchObject({ ok: false, figures: { jobs: 100 } });

    await restart('SIGKILL');
    expect(await metric(serve, DEPTH), 'jobs carried over the kill').toBe(100);
    hook.then = 200;
    await eventually(async () => delivered(hook.calls).length >= 100 && (await metric(serve, DEPTH)) === 0, WAIT_MS, 100);
    await sleep(1500);
    const hooks = delivered(hook.calls);
    expect(hooks).toHaveLength(100);
    expect(hooks.map(submissionOf).sort()).toEqual([...accepted].sort());
  }, 150_000);

  it("5. a submission whose 3rd job does not fit is refused whole; the client's retries, with and without its Idempotency-Key, and a restart: each destination gets each submission once", async () => {
    // 98 of the 100 places held by jobs of a receiver that keeps refusing.
    const blocker = await receiver();
    blocker.then = 503;
    const blocking = await relay.form({ hook: blocker });
    for (let n = 0; n < 98; n++) await relay.submit(blocking.site, blocking.form, { n });
    // A dead job to retry by hand later, and the form with three destinations.
    const gone = await receiver();
    gone.answers.push(410);
    const dying = await relay.form({ hook: gone });
    await relay.submit(dying.site, dying.form, { n: 'dead' });
    const [deadJob] = await eventually(async () => {
      const listed = await relay.jobs(dying.site, dying.form);
      return listed[0]?.state === 'dead' ? listed : undefined;
    }, WAIT_MS, 100);
    const hooks = [await receiver(), await receiver(), await receiver()];
    const { site, form } = await relay.form({ hooks });

    // 98 jobs queued: a submission needing 3 places is refused, none of its jobs queued.
    const body = { siteKey: site.siteKey, formKey: form.formKey, data: { name: 'Ada' } };
    const plain = await relay.call('POST', '/submissions', body);
    expect(plain.status, plain.text).toBe(503);
    const keyed = await relay.call('POST', '/submissions', { ...body, data: { name: 'Grace' } }, { 'idempotency-key': 'order-4711-contact' });
    expect(keyed.status, keyed.text).toBe(503);
    // Full to the last place: a manual retry is refused as well, and the job stays dead for the next one.
    for (let n = 98; n < 100; n++) await relay.submit(blocking.site, blocking.form, { n });
    const early = await relay.call('POST', `/admin/jobs/${deadJob.jobId}/retry`);
    expect(early.status, early.text).toBe(503);
    expect(await relay.admin('GET', `/admin/jobs/${deadJob.jobId}`)).toMatchObject({ state: 'dead', series: 1 });

    // Room again; the clients send again: the plain one as a new submission, the keyed one with its key.
    blocker.then = 200;
    await eventually(async () => (await metric(serve, DEPTH)) === 0, WAIT_MS, 100);
    const plainAgain = await relay.submit(site, form, { name: 'Ada' });
    const keyedAgain = await relay.call('POST', '/submissions', { ...body, data: { name: 'Grace' } }, { 'idempotency-key': 'order-4711-contact' });
    expect(keyedAgain.status, keyedAgain.text).toBe(201);
    gone.then = 200;
    expect((await relay.call('POST', `/admin/jobs/${deadJob.jobId}/retry`)).status).toBe(202);

    await restart('SIGTERM');
    const settled = await eventually(async () => {
      const listed = await relay.jobs(site, form);
      const done = listed.filter((job) => job.state === 'delivered');
      return done.length === 6 && (await metric(serve, DEPTH)) === 0 ? listed : undefined;
    }, WAIT_MS, 100);
    await sleep(1500);
    for (const hook of hooks) {
      const calls = delivered(hook.calls);
      expect(calls.map(submissionOf).sort(), 'one delivery per submission').toEqual([plainAgain, keyedAgain.body.submissionId].sort());
      expect(hook.calls).toHaveLength(2);
    }
    // The refused plain request's jobs are withdrawn: never attempted, never retried.
    expect(settled.filter((job) => job.state === 'withdrawn')).toHaveLength(3);
    expect((await relay.call('POST', `/admin/jobs/${settled.find((job) => job.state === 'withdrawn').jobId}/retry`)).status).toBe(409);
    // The dead job: delivered by its retry's series, once; the listing shows that series.
    expect(delivered(gone.calls)).toHaveLength(1);
    expect((await relay.jobs(dying.site, dying.form))[0]).toMatchObject({ state: 'delivered', series: 2, lastError: '' });
  }, 180_000);
});

describe('cluster: a gateway with the relay, a consumer and two `sluice deliver` processes on NATS', () => {
  let gateway: SluiceProcess;
  let workers: SluiceProcess[] = [];
  const relay = new RelayClient(() => gateway, OPERATOR_TOKEN);
  const { stream } = deliveryStreamOf(prefix);

  beforeAll(async () => {
    nc = await connectNats(NATS_URL);
    const env = {
      NATS_URL,
      SLUICE_NATS_PREFIX: prefix,
      SLUICE_NATS_MAX_STREAM_BYTES: String(64 * 1024 * 1024),
      SLUICE_DELIVERY_MAX_QUEUE_BYTES: String(16 * 1024 * 1024),
      SLUICE_DELIVERY_ACK_WAIT_SECONDS: String(ACK_WAIT_SECONDS),
      SLUICE_RELAY_MASTER_KEY: randomBytes(32).toString('base64'),
    };
    gateway = await start('gateway', 'gateway', env);
    const started = await Promise.all([start('consume', 'consume', env), start('deliver', 'deliver-1', env), start('deliver', 'deliver-2', env)]);
    workers = started.slice(1);
    await relay.onboard();
  }, 90_000);

  /** Delivery jobs not yet acknowledged (waiting, being attempted, or waiting for a retry). */
  async function lag(): Promise<number> {
    const info = await (await jetstreamManager(nc!)).consumers.info(stream, DELIVERY_DURABLE);
    return info.num_pending + info.num_ack_pending;
  }

  /** The `attempting` figure of a worker's delivery queue (its readiness report). */
  async function attempting(worker: SluiceProcess): Promise<number> {
    const report = await (await fetch(`${worker.baseUrl}/api/v1/ready`)).json();
    return report.components['delivery.queue']?.figures?.attempting ?? 0;
  }

  /** Webhooks the worker delivered (a counter it shows from its first delivery on). */
  async function deliveredBy(worker: SluiceProcess): Promise<number> {
    return (await metric(worker, WEBHOOKS_DELIVERED)) ?? 0;
  }

  it('each `sluice deliver` runs a render pool of its own; the gateway starts its pool on first use', async () => {
    for (const worker of workers) {
      const report = await (await fetch(`${worker.baseUrl}/api/v1/ready`)).json();
      expect(report.components['render pool']).toMatchObject({ ok: true, figures: { threads: 1 } });
    }
    const report = await (await fetch(`${gateway.baseUrl}/api/v1/ready`)).json();
    expect(report.components['render pool']).toEqual({ ok: true, detail: 'not started: starts on first use' });
  });

  it('3. every webhook delivered exactly once across two workers; a worker killed mid-attempt hands its job to the other', async () => {
    const N = 20;
    const hook = await receiver();
    const { site, form } = await relay.form({ hook });
    // The workers resolve a job from their mirror of the relay's configuration (NATS KV watch):
    // give the new form a moment to reach them, or its jobs would find no webhook.
    await sleep(2000);
    const submitted: string[] = [];
    for (let n = 0; n < N; n++) submitted.push(await relay.submit(site, form, { n }));

    const workerLogs = async () => (await Promise.all(workers.map(async (w) => `--- ${w.name}\n${(await w.log()).slice(-2000)}`))).join('\n');
    await eventually(async () => byWebhookId(hook.calls).size === N && (await lag()) === 0, WAIT_MS, 100).catch(async (err) => {
      throw new Error(`${err.message}: ${byWebhookId(hook.calls).size} of ${N} webhook-ids received\n${await workerLogs()}`);
    });
    await sleep(1500);
    expect(hook.calls, 'calls').toHaveLength(N);
    expect(delivered(hook.calls)).toHaveLength(N);
    expect(hook.calls.every((call) => call.verified)).toBe(true);
    expect(new Set(hook.calls.map((call) => call.headers['webhook-id'])).size).toBe(N);
    expect(hook.calls.map(submissionOf).sort()).toEqual([...submitted].sort());
    const split = await Promise.all(workers.map(deliveredBy));
    expect(split[0]! + split[1]!, `deliveries counted by the workers (${split.join(' + ')})`).toBe(N);

    // One more submission; the receiver holds its first call open.
    hook.answers.push('hold');
    const last = await relay.submit(site, form, { n: N });
    await eventually(() => hook.held() === 1, WAIT_MS, 50);
    const { holding } = await eventually(async () => {
      const figures = await Promise.all(workers.map(attempting));
      const index = figures.indexOf(1);
      return index >= 0 && figures[1 - index] === 0 ? { holding: index } : undefined;
    }, WAIT_MS, 100);
    const [victim, survivor] = [workers[holding]!, workers[1 - holding]!];
    const survivorBefore = await deliveredBy(survivor);
    await victim.stop('SIGKILL');
    await eventually(() => hook.held() === 0, WAIT_MS, 50);

    // After the ack wait JetStream hands the job to the survivor, which delivers it.
    await eventually(async () => delivered(hook.calls).length === N + 1 && (await lag()) === 0, WAIT_MS, 100).catch(async (err) => {
      throw new Error(`${err.message}: the killed worker's job was not redelivered\n${await workerLogs()}`);
    });
    await sleep(1500);
    const [held, redelivered] = hook.calls.slice(N);
    expect(hook.calls, 'calls: N, then one held and one delivered').toHaveLength(N + 2);
    expect([held!.answer, redelivered!.answer]).toEqual(['held', 200]);
    expect(redelivered!.headers['webhook-id']).toBe(held!.headers['webhook-id']);
    expect(redelivered!.verified).toBe(true);
    expect(submissionOf(redelivered!)).toBe(last);
    expect(await deliveredBy(survivor), 'the survivor delivered the killed worker\'s job').toBe(survivorBefore + 1);
  }, 150_000);
});
