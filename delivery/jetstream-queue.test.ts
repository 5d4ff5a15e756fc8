/**
 * The JetStream delivery queue against a real nats-server with JetStream (NATS_URL, default
 * nats://127.0.0.1:4222; deploy/services.sh starts one). Each test uses a stream of its own.
 */
import { randomBytes } from 'node:crypto';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { createLogger } from '../core/log.ts';
import { Supervisor } from '../core/supervisor.ts';
import { eventually, removeNatsPrefixes } from '../test/harness.ts';
import { DELIVERY_DURABLE, deliveryStreamOf, deliveryWaitingStreamOf } from '../bus/jetstream-names.ts';
import type { DeliveryJob } from './job.ts';
import { JetStreamDeliveryQueue } from './jetstream-queue.ts';
import { AMPLE_SHARES, describeDeliveryQueue, testJob, type QueueSettings } from './queue.suite.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const prefixes: string[] = [];
const log = createLogger('silent');

afterAll(() => removeNatsPrefixes(NATS_URL, prefixes));

async function openQueue(prefix: string, { maxBytes = 64 * 1024 * 1024, shares = AMPLE_SHARES, pullExpiresMs }: QueueSettings & { pullExpiresMs?: number } = {}) {
  const nc = await connect({ servers: NATS_URL, timeout: 3000 }).catch((err: Error) => {
    throw new Error(`NATS is not reachable at ${NATS_URL} (start it with deploy/services.sh): ${err.message}`);
  });
  const restarts: string[] = [];
  const supervisor = new Supervisor({ log, onRestart: (loop) => restarts.push(loop) });
  const queue = new JetStreamDeliveryQueue(nc, {
    prefix, replicas: 1, maxStreamBytes: maxBytes, ackWaitMs: 2000, retryAfterSeconds: 2, shares, run: (name, loop) => supervisor.run(name, loop), log, pullExpiresMs,
  });
  await queue.start();
  const close = async () => {
    await supervisor.stop();
    if (!nc.isClosed()) await nc.close();
  };
  return { queue, close, nc, supervisor, restarts };
}

function freshPrefix(): string {
  const prefix = `TQ${randomBytes(4).toString('hex').toUpperCase()}`;
  prefixes.push(prefix);
  return prefix;
}

describeDeliveryQueue('JetStream', async () => {
  const prefix = freshPrefix();
  const closes: Array<() => Promise<void>> = [];
  return {
    async open(settings) {
      const { queue, close } = await openQueue(prefix, settings);
      closes.push(close);
      // A process killed: its connection drops, so its attempt stops telling JetStream it is alive.
      return { queue, kill: close };
    },
    async cleanup() {
      for (const close of closes) await close();
    },
  };
});

describe('JetStream delivery queue', () => {
  it('delivers 100 jobs for a healthy receiver while 10,000 for a dead one wait for their retry, outside the pending window', async () => {
    const prefix = freshPrefix();
    const { queue, close, nc } = await openQueue(prefix);
    try {
      const dead = Array.from({ length: 10_000 }, () => testJob({ destination: 'dead' }));
      // Enqueued a submission's worth at a time (a bundle of 100 jobs each), as intake would.
      for (let i = 0; i < dead.length; i += 100) await queue.enqueue(dead.slice(i, i + 100));
      const attempted = new Set<string>();
      const delivered: string[] = [];
      queue.consume(async ({ job }) => {
        if (job.destination === 'alive') {
          delivered.push(job.id);
          return { done: true };
        }
        attempted.add(job.id);
        return { retryInMs: 3_600_000 };
      }, 64);
      await eventually(() => attempted.size === dead.length, 120_000, 200);
      const healthy = Array.from({ length: 100 }, () => testJob({ destination: 'alive' }));
      await queue.enqueue(healthy);
      await eventually(() => delivered.length === 100, 30_000);
      // The 10,000 wait in the waiting stream, none of them in the due stream's pending window.
      const jsm = await jetstreamManager(nc);
      const due = await jsm.consumers.info(deliveryStreamOf(prefix).stream, DELIVERY_DURABLE);
      expect(due.num_ack_pending).toBe(0);
      expect(await queue.depth()).toBe(10_000);
    } finally {
      await queue.shutdown();
      await close();
    }
  }, 240_000);

  /** A queue consuming, once its pull waits on the server: one that would wait a minute for jobs, so only a stop can end it in time. */
  async function pullingQueue() {
    const prefix = freshPrefix();
    const opened = await openQueue(prefix, { pullExpiresMs: 60_000 });
    opened.queue.consume(async () => ({ done: true }), 2);
    const jsm = await jetstreamManager(opened.nc);
    await eventually(async () => (await jsm.consumers.info(deliveryStreamOf(prefix).stream, DELIVERY_DURABLE)).num_waiting > 0);
    return opened;
  }

  it('keeps the retries of two jobs that had the same sequence of the due stream (a stream that started again at 1)', async () => {
    const prefix = freshPrefix();
    const { stream: due } = deliveryStreamOf(prefix);
    const attempted: string[] = [];
    const failAll = async ({ job }: { job: DeliveryJob }) => {
      attempted.push(job.id);
      return { retryInMs: 3_600_000 };
    };
    const retriesWaiting = async (jsm: JetStreamManager) => (await jsm.streams.info(deliveryWaitingStreamOf(prefix).stream)).state.messages;
    const nc = await connect({ servers: NATS_URL, timeout: 3000 });
    const jsm = await jetstreamManager(nc);
    const first = await openQueue(prefix);
    const a = testJob();
    await first.queue.enqueue([a]);
    first.queue.consume(failAll, 8);
    await eventually(async () => attempted.includes(a.id) && (await retriesWaiting(jsm)) === 1, 30_000, 100);
    await first.queue.shutdown();
    await first.close();
    // The due stream starts over: job B's message gets job A's sequence.
    await jsm.streams.delete(due);
    const second = await openQueue(prefix);
    const b = testJob();
    await second.queue.enqueue([b]);
    second.queue.consume(failAll, 8);
    try {
      await eventually(async () => attempted.includes(b.id) && (await jsm.consumers.info(due, DELIVERY_DURABLE)).num_ack_pending === 0, 30_000, 100);
      // Both retries wait: B's was not dropped as a duplicate of A's.
      expect(await retriesWaiting(jsm)).toBe(2);
    } finally {
      await second.queue.shutdown();
      await second.close();
      await nc.close();
    }
  });

  it('shuts down without waiting for its pull to expire, and its loop ends without being taken for a failure', async () => {
    const { queue, close, nc, supervisor, restarts } = await pullingQueue();
    try {
      // As a process shuts down: the queue, then the NATS connection (drained), the supervisor last.
      const startedAt = Date.now();
      await queue.shutdown();
      await nc.drain();
      await supervisor.stop();
      expect(Date.now() - startedAt).toBeLessThan(30_000);
      expect(restarts).toEqual([]);
      expect(queue.statuses()['delivery.queue']).toMatchObject({ ok: false, detail: 'shutting down' });
    } finally {
      await close();
    }
  });

  it("ends a pull under way when its supervisor stops (a worker process's loops stopped first)", async () => {
    const { close, supervisor } = await pullingQueue();
    try {
      const startedAt = Date.now();
      await supervisor.stop();
      expect(Date.now() - startedAt).toBeLessThan(30_000);
    } finally {
      await close();
    }
  });
});
