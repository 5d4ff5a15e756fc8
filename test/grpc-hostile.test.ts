/**
 * Clients of the OTLP/gRPC port that do not play along (issue 13), against a whole `sluice
 * serve`, loopback only: calls that declare ~10 MiB and stall one byte short (with and without
 * a key), connections that never speak HTTP/2 or go quiet after the preface, more connections
 * than the port takes. An ordinary exporter beside each keeps its OK; memory stays bounded.
 * The shutdown grace runs on a gRPC server of its own (a whole server's grace is a constant).
 */
import { constants, type ClientHttp2Session } from 'node:http2';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ByteBudget } from '../core/byte-budget.ts';
import { GrpcCode } from '../core/errors.ts';
import { SluiceMetrics } from '../core/metrics.ts';
import { clientIpResolver } from '../gateway/client-ip.ts';
import { OtlpGrpcServer } from '../gateway/grpc/server.ts';
import { TokenBucketLimiter } from '../gateway/limiter.ts';
import { IngestTally } from '../pipeline/ingest-tally.ts';
import { capturedLog } from './faults.ts';
import { H2_PREFACE, h2Connect, partialCall, silentConnection, type CallOutcome } from './grpc-raw.ts';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';
import { exportOnce, exporterFor, finishedSpans } from './otel-clients.ts';

const MiB = 1024 * 1024;
const MESSAGE_TIMEOUT_MS = 3000;
const MAX_CONNECTIONS = 40;
/** Declared by each stalled call: the body cap; one byte of it is never sent. */
const DECLARED = 10 * MiB;

let sluice: TestSluice;
const log = capturedLog();
let sessions: ClientHttp2Session[] = [];

beforeAll(async () => {
  sluice = await startTestSluice(
    {
      'grpc.maxConnections': MAX_CONNECTIONS,
      'grpc.handshakeTimeoutMs': 1000,
      // Long enough for the connection-cap test to fill the port before its connections go idle.
      'grpc.idleTimeoutMs': 8000,
      'grpc.messageTimeoutMs': MESSAGE_TIMEOUT_MS,
      // Room for four stalled messages; each connection may hold 12 MiB of it.
      'limits.maxInFlightBytes': 48 * MiB,
      // Every client here is 127.0.0.1: the rate limit is not what these tests are about.
      'limits.rateBurst': 100_000,
      'limits.ratePerMinute': 100_000,
    },
    log.log,
  );
});
afterEach(() => {
  for (const session of sessions) session.destroy();
  sessions = [];
});
afterAll(async () => {
  await sluice?.stop();
});

/** `count` connections with `perConnection` calls each, all stalled one byte short of DECLARED. */
function stalledCalls(connections: number, perConnection: number, apiKey?: string): Promise<CallOutcome[]> {
  const calls: Array<Promise<CallOutcome>> = [];
  for (let c = 0; c < connections; c++) {
    const session = h2Connect(sluice.grpcAddress);
    sessions.push(session);
    for (let i = 0; i < perConnection; i++) calls.push(partialCall(session, { apiKey, declared: DECLARED, send: DECLARED - 1 }));
  }
  return Promise.all(calls);
}

/** Resolves with `promise`, or rejects after `ms` saying what did not happen. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Samples this process's RSS (the server runs in it) until stopped; resolves with the growth over `before`. */
function rssGrowth(): { stop: () => number } {
  const before = process.memoryUsage().rss;
  let peak = before;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 25);
  return {
    stop: () => {
      clearInterval(timer);
      return Math.max(peak, process.memoryUsage().rss) - before;
    },
  };
}

/** An ordinary exporter (the official OTel gRPC one) exporting `rounds` times; resolves with the result codes. */
async function ordinaryExports(rounds: number): Promise<number[]> {
  const codes: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const result = await exportOnce(exporterFor('traces', 'grpc', sluice), finishedSpans('beside-the-attack', 2));
    codes.push(result.code);
  }
  return codes;
}

/** One sample of /metrics, 0 when absent. */
async function sample(name: string): Promise<number> {
  const line = (await sluice.metrics.render()).split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

const limited = (limit: string) => sample(`sluice_grpc_limited_total{limit="${limit}"}`);

describe('calls that stall one byte short of a 10 MiB message', () => {
  it('without a key: each gets UNAUTHENTICATED without its message being read, and an exporter beside keeps its OK', async () => {
    const rss = rssGrowth();
    const [outcomes, codes] = await within(Promise.all([stalledCalls(10, 10), ordinaryExports(5)]), 30_000, '100 calls without a key answered');
    const growth = rss.stop();
    expect(outcomes.map((o) => o.status)).toEqual(Array(100).fill(GrpcCode.UNAUTHENTICATED));
    // Flow control held each client to one window: nothing past it was read.
    for (const outcome of outcomes) expect(outcome.sent).toBeLessThan(DECLARED / 10);
    expect(codes).toEqual([0, 0, 0, 0, 0]);
    expect(growth).toBeLessThan(150 * MiB);
  });

  it('with a key: bounded by the byte budget (UNAVAILABLE + RetryInfo beyond it), each held call ended by the message deadline', async () => {
    const refusalsBefore = await sample('sluice_inflight_refusals_total');
    const timeoutsBefore = await limited('message_timeout');
    const rss = rssGrowth();
    const started = Date.now();
    const [outcomes, codes] = await within(
      Promise.all([stalledCalls(10, 10, sluice.apiKey), ordinaryExports(5)]),
      MESSAGE_TIMEOUT_MS + 30_000,
      '100 stalled calls with a key ended',
    );
    const growth = rss.stop();
    const expired = outcomes.filter((o) => o.status === GrpcCode.DEADLINE_EXCEEDED);
    const refused = outcomes.filter((o) => o.status === GrpcCode.UNAVAILABLE);
    // 48 MiB hold four 10 MiB messages; every other call was refused before its message was kept.
    expect(expired.length).toBeGreaterThanOrEqual(1);
    expect(expired.length).toBeLessThanOrEqual(4);
    expect(refused.length).toBe(100 - expired.length);
    for (const outcome of refused) expect(outcome.details).toBe(true);
    for (const outcome of expired) expect(outcome.closedAt - started).toBeGreaterThanOrEqual(MESSAGE_TIMEOUT_MS - 100);
    expect(codes).toEqual([0, 0, 0, 0, 0]);
    expect(growth).toBeLessThan(150 * MiB);
    expect(await sample('sluice_inflight_refusals_total')).toBeGreaterThan(refusalsBefore);
    expect(await limited('message_timeout')).toBe(timeoutsBefore + expired.length);
    // Every byte the held calls reserved came back.
    await eventually(async () => (await sample('sluice_inflight_bytes{figure="in_use"}')) === 0);
    expect(log.entries().some((e) => e.limit === 'message_timeout' && e.level === 40)).toBe(true);
  });
});

describe('connections', () => {
  it('closes connections that never send the HTTP/2 preface, and those that go quiet after it', async () => {
    const port = sluice.grpcPort;
    const mute = Array.from({ length: 5 }, () => silentConnection(port));
    const quiet = Array.from({ length: 5 }, () => silentConnection(port, H2_PREFACE));
    try {
      await within(Promise.all([...mute, ...quiet].map((c) => c.closed)), 30_000, 'idle connections closed by the server');
      // The server let go of its sockets too, though the clients never closed theirs.
      await eventually(async () => (await sample('sluice_grpc_connections')) === 0);
      expect(await limited('handshake_timeout')).toBeGreaterThanOrEqual(5);
      expect(await limited('idle_timeout')).toBeGreaterThanOrEqual(5);
    } finally {
      for (const c of [...mute, ...quiet]) c.socket.destroy();
    }
  });

  it(`refuses connections past ${MAX_CONNECTIONS} at accept, says so, and serves again once others are gone`, async () => {
    await eventually(async () => (await sample('sluice_grpc_connections')) === 0);
    const refusedBefore = await limited('max_connections');
    const held = Array.from({ length: MAX_CONNECTIONS }, () => silentConnection(sluice.grpcPort, H2_PREFACE));
    try {
      await within(Promise.all(held.map((c) => c.heard)), 10_000, `${MAX_CONNECTIONS} connections taken`);
      const extra = Array.from({ length: 10 }, () => silentConnection(sluice.grpcPort, H2_PREFACE));
      await within(Promise.all(extra.map((c) => c.closed)), 10_000, 'connections past the cap closed');
      expect(await limited('max_connections')).toBe(refusedBefore + 10);
      expect(await sample('sluice_grpc_connections')).toBeLessThanOrEqual(MAX_CONNECTIONS);
      const line = log.entries().find((e) => e.limit === 'max_connections');
      expect(line).toMatchObject({ level: 40, maxConnections: MAX_CONNECTIONS });
    } finally {
      for (const c of held) c.socket.destroy();
    }
    await eventually(async () => (await sample('sluice_grpc_connections')) === 0);
    expect(await ordinaryExports(1)).toEqual([0]);
  });
});

describe('close(graceMs)', () => {
  const KEY = 'slk_close_test';
  let server: OtlpGrpcServer;
  let address: string;

  beforeAll(async () => {
    const metrics = new SluiceMetrics();
    server = new OtlpGrpcServer({
      // Stands in for the pipeline: a call whose message arrived is answered after a second.
      ingest: { ingestOtlp: () => new Promise((resolve) => setTimeout(() => resolve({ accepted: 1, rejected: 0 }), 1000)) },
      budget: new ByteBudget({ limitBytes: 64 * MiB, retryAfterSeconds: 1 }),
      auth: { authenticate: (key) => (key === KEY ? 'source' : undefined) },
      limiter: new TokenBucketLimiter({ ratePerMinute: 1000, burst: 1000 }),
      clientIp: clientIpResolver([]),
      metrics,
      // Counts go nowhere: this test is about closing.
      tally: new IngestTally({ bus: { publish: async () => {} }, log: capturedLog().log }),
      log: capturedLog().log,
      maxBodyBytes: 10 * MiB,
      limits: { maxConnections: 100, handshakeTimeoutMs: 10_000, idleTimeoutMs: 60_000, messageTimeoutMs: 60_000, maxConnectionBytes: 16 * MiB },
    });
    address = `127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
  });
  afterAll(async () => {
    await server?.close(0);
  });

  it('stops taking connections at once, lets a call in flight finish, and cancels a held one at the grace', async () => {
    const GRACE_MS = 3000;
    const session = h2Connect(address);
    sessions.push(session);
    const held = partialCall(session, { apiKey: KEY, declared: 1000, send: 500 });
    const finishing = partialCall(session, { apiKey: KEY, declared: 1000, send: 1000 });
    // Both calls under way (the second one's message in the pipeline) before the shutdown starts.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = Date.now();
    let closedAt = 0;
    void server.close(GRACE_MS).then(() => (closedAt = Date.now()));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const late = silentConnection(Number(address.split(':')[1]), H2_PREFACE);
    expect(await within(late.closed, 5000, 'a connection after close refused')).toBeGreaterThan(0);

    await eventually(() => closedAt > 0, GRACE_MS + 8000);
    expect(closedAt - started).toBeGreaterThanOrEqual(GRACE_MS - 50);
    expect((await finishing).status).toBe(GrpcCode.OK);
    const cancelled = await within(held, 5000, 'the held call ended');
    expect(cancelled.status).toBeUndefined();
    expect(cancelled.rstCode).toBe(constants.NGHTTP2_CANCEL);
  });
});
