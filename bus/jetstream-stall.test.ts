/**
 * A JetStream bus whose server stops answering (a nats-server of this test's own, frozen with
 * SIGSTOP: the connection stays open): the publish that times out keeps its bytes reserved
 * until the server answers again, later publishes are refused at once instead of queueing
 * more bytes, and once the server answers the timed-out message is withdrawn from its stream.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, JetStreamApiCodes, JetStreamApiError, jetstreamManager, RetentionPolicy, type JetStreamClient } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ByteBudget } from '../core/byte-budget.ts';
import { eventually } from '../test/harness.ts';
import { startNatsServer, type NatsProcess } from '../test/sluice-processes.ts';
import type { TableChunk } from './bus.ts';
import { JetStreamBus } from './jetstream.ts';
import { deleteIfOurs, PublishStall } from './jetstream-stall.ts';
import { streamOf } from './jetstream-names.ts';

const log = pino({ level: process.env.SLUICE_TEST_LOG_LEVEL ?? 'silent' });
let dir: string;
let nats: NatsProcess;
let nc: NatsConnection;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-stall-bus-'));
  nats = await startNatsServer(dir);
  nc = await connect({ servers: nats.url });
});
afterAll(async () => {
  await nc?.close();
  await nats?.stop();
  await rm(dir, { recursive: true, force: true });
});

const chunk = (bytes: number): TableChunk => ({ table: 'otel_traces', columns: ['A', 'B'], rows: 1, data: new Uint8Array(bytes).fill(7) });

describe('a JetStream bus whose server stops answering', () => {
  it('keeps the timed-out bytes reserved, refuses at once, and withdraws the message once the server answers', async () => {
    const bus = new JetStreamBus(nc, { natsUrl: nats.url, prefix: 'STALL', tables: ['otel_traces'], maxStreamBytes: 16 * 1024 * 1024, publishTimeoutMs: 500, retryAfterSeconds: 2, log });
    await bus.start();
    const jsm = await jetstreamManager(nc);
    const { stream } = streamOf('STALL', 'otel_traces');
    const budget = new ByteBudget({ limitBytes: 1024 * 1024, retryAfterSeconds: 2 });

    await nats.freeze();
    const request = budget.reserve(100_000);
    await expect(bus.publish([chunk(100_000)], request)).rejects.toMatchObject({ code: 'unavailable', retryAfterSeconds: 2 });
    request.release();
    // Its bytes may still sit in the connection: they stay counted.
    expect(budget.figures.inUseBytes).toBe(100_000);
    expect(bus.statuses().bus).toMatchObject({ ok: false, detail: expect.stringContaining('stalled'), figures: { withdrawalsPending: 1 } });
    const started = Date.now();
    await expect(bus.publish([chunk(10)])).rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining('stalled') });
    expect(Date.now() - started).toBeLessThan(400); // refused at once, not after a timeout
    // ...and before a request is decoded (pipeline/ingest.ts asks first).
    expect(bus.refusal()).toMatchObject({ code: 'unavailable', retryAfterSeconds: 2, message: expect.stringContaining('stalled') });

    nats.thaw();
    await eventually(() => bus.statuses().bus?.ok && bus.statuses().bus?.figures?.withdrawalsPending === 0, 15_000);
    expect(budget.figures.inUseBytes).toBe(0);
    expect(bus.statuses().bus?.figures).toMatchObject({ withdrawn: 1, notWithdrawn: 0 });
    expect((await bus.figures()).timedOut).toEqual({ pending: 0, withdrawn: 1, notWithdrawn: 0 });
    // The late message reached the stream and was withdrawn: nothing of the refused request is left.
    expect((await jsm.streams.info(stream)).state.messages).toBe(0);

    expect(bus.refusal()).toBeUndefined();
    await bus.publish([chunk(10)]);
    expect((await jsm.streams.info(stream)).state.messages).toBe(1);
    await bus.shutdown();
  });
});

describe('withdrawing while no stream takes requests (its nodes electing a leader)', () => {
  /** A stream holding one message published with msgID `original` (its PubAck lost, say). */
  async function streamWithOriginal(prefix: string) {
    const { stream, subject } = streamOf(prefix, 'otel_traces');
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: stream, subjects: [subject], retention: RetentionPolicy.Workqueue });
    await jetstream(nc).publish(subject, new Uint8Array([1, 2, 3]), { msgID: 'original' });
    return { subject, messages: async () => (await jsm.streams.info(stream)).state.messages };
  }

  const noLeader = () => Object.assign(new Error('jetstream is not enabled'), { name: 'JetStreamNotEnabled' });
  /** What a node that restarted answers for a stream it has not loaded yet. */
  const notLoadedYet = () => new JetStreamApiError({ code: 404, err_code: JetStreamApiCodes.StreamNotFound, description: 'stream not found' });

  /** nats.js's JetStream client, but its first `refusals` publishes fail as they do while no stream leader answers (or with `refusal`). */
  function electing(refusals: number, refusal: () => Error = noLeader) {
    const js = jetstream(nc);
    const calls = { publishes: 0 };
    const client = {
      publish: (...args: Parameters<JetStreamClient['publish']>) => {
        if (calls.publishes++ < refusals) return Promise.reject(refusal());
        return js.publish(...args);
      },
    } as unknown as JetStreamClient;
    return { client, calls };
  }

  it('asks again until the stream takes the withdrawal (it once gave up at once: the refused request stayed stored)', async () => {
    const { subject, messages } = await streamWithOriginal('STALLELECT');
    const { client, calls } = electing(3);
    const stall = new PublishStall(nc, client, { duplicateWindowMs: 60_000, probeRetryMs: 100, log });
    stall.timedOut([{ subject, msgID: 'original', columns: 'A,B' }], []);
    await eventually(() => stall.figures.withdrawalsPending === 0, 15_000);
    expect(stall.figures).toEqual({ withdrawalsPending: 0, withdrawn: 1, notWithdrawn: 0 });
    expect(calls.publishes).toBe(4);
    expect(await messages()).toBe(0);
    stall.shutdown();
  });

  it('asks again while a node that restarted answers "stream not found" for the stream the publish reached', async () => {
    const { subject, messages } = await streamWithOriginal('STALLNOTLOADED');
    const { client, calls } = electing(2, notLoadedYet);
    const stall = new PublishStall(nc, client, { duplicateWindowMs: 60_000, probeRetryMs: 100, log });
    stall.timedOut([{ subject, msgID: 'original', columns: 'A,B' }], []);
    await eventually(() => stall.figures.withdrawalsPending === 0, 15_000);
    expect(stall.figures).toEqual({ withdrawalsPending: 0, withdrawn: 1, notWithdrawn: 0 });
    expect(calls.publishes).toBe(3);
    expect(await messages()).toBe(0);
    stall.shutdown();
  });

  it('withdraws later, by msgID, a stored part of a refused request whose delete no stream took', async () => {
    const { subject, messages } = await streamWithOriginal('STALLLATER');
    const { client } = electing(1);
    const stall = new PublishStall(nc, client, { duplicateWindowMs: 60_000, probeRetryMs: 100, log });
    stall.withdrawLater([{ subject, msgID: 'original', columns: 'A,B' }]);
    expect(stall.stalled).toBe(false);
    await eventually(() => stall.figures.withdrawn === 1, 15_000);
    expect(stall.figures.notWithdrawn).toBe(0);
    expect(await messages()).toBe(0);
    stall.shutdown();
  });
});

describe('deleteIfOurs', () => {
  it('deletes a message only if it carries the msgID meant: a sequence named by a duplicate\'s PubAck is checked first', async () => {
    const { stream, subject } = streamOf('STALLOURS', 'otel_traces');
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: stream, subjects: [subject], retention: RetentionPolicy.Workqueue });
    const js = jetstream(nc);
    const acknowledged = await js.publish(subject, new Uint8Array([1]), { msgID: 'acknowledged' });
    const refused = await js.publish(subject, new Uint8Array([2]), { msgID: 'refused' });
    expect(await deleteIfOurs(jsm, stream, acknowledged.seq, 'refused')).toBe(false);
    expect((await jsm.streams.info(stream)).state.messages).toBe(2);
    expect(await deleteIfOurs(jsm, stream, refused.seq, 'refused')).toBe(true);
    await expect(deleteIfOurs(jsm, stream, refused.seq, 'refused')).rejects.toThrow(/a consumer took it first/);
    expect((await jsm.streams.getMessage(stream, { seq: acknowledged.seq }))?.data).toEqual(new Uint8Array([1]));
  });
});
