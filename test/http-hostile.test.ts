/**
 * The HTTP front door under hostile clients, on a whole `sluice serve` (loopback, bounded loops):
 * uploads held open, bodies that trickle, clients that leave, a second server on the same ports,
 * pipelined requests, requests an engine cannot parse, a body announced over the cap. Runs on
 * both engines (vitest.config.ts HTTP_FACING).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './free-port.ts';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';

const MiB = 1024 * 1024;
const SLUICE = fileURLToPath(new URL('../bin/sluice.mjs', import.meta.url));
let sluice: TestSluice;

beforeAll(async () => {
  sluice = await startTestSluice({
    'http.port': await freePort(),
    'relay.port': await freePort(),
    'limits.maxInFlightBytes': 256 * MiB,
    // A body gets 1 s, plus a second per 64 KiB it sent (the default rate).
    'limits.bodyTimeoutMs': 1000,
    'limits.rateBurst': 100_000,
    'limits.ratePerMinute': 100_000,
  });
});
afterAll(async () => {
  await sluice?.stop();
});

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const rssMiB = () => process.memoryUsage().rss / MiB;

async function metric(pattern: RegExp): Promise<number> {
  const text = await (await fetch(`${sluice.baseUrl}/metrics`)).text();
  return Number(pattern.exec(text)?.[1] ?? 0);
}
const inUse = () => metric(/^sluice_inflight_bytes\{figure="in_use"\} (\d+)$/m);

/**
 * A raw connection: everything received, whether it was closed or reset, and writes that wait for
 * the socket. Half-open allowed: it goes on sending after the server's FIN, as a client that has
 * not read its answer yet does.
 */
function raw(port = sluice.httpPort) {
  const socket: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  /** ended: the server sent its FIN (or the connection is gone). */
  const state = { received: '', ended: false, closed: false, errors: [] as string[] };
  socket.on('data', (data) => (state.received += data.toString('latin1')));
  socket.on('error', (err: NodeJS.ErrnoException) => state.errors.push(err.code ?? err.message));
  socket.on('end', () => (state.ended = true));
  socket.on('close', () => (state.closed = state.ended = true));
  return {
    state,
    socket,
    /** Resolves once the kernel took the bytes (or the connection is gone). */
    write: (data: string | Uint8Array) => new Promise<void>((resolve) => void socket.write(data, () => resolve())),
    statuses: () => [...state.received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1])),
    destroy: () => socket.destroy(),
  };
}

const postHead = (path: string, length: number, type = 'application/x-protobuf') =>
  `POST ${path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: ${type}\r\nx-api-key: ${sluice.apiKey}\r\ncontent-length: ${length}\r\n\r\n`;

const PIECE = Buffer.alloc(64 * 1024, 0x61);

/** Writes `bytes` of filler, as fast as the server reads it. */
async function sendFiller(client: ReturnType<typeof raw>, bytes: number): Promise<void> {
  for (let sent = 0; sent < bytes && !client.state.closed; sent += PIECE.length) await client.write(PIECE.subarray(0, Math.min(PIECE.length, bytes - sent)));
}

const smallTraces = JSON.stringify({
  resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: '5b8efff798038103d269b633813fc60c', spanId: 'eee19b7ec3c1b174', name: 'ordinary', kind: 1, startTimeUnixNano: '1700000000000000000', endTimeUnixNano: '1700000000100000000' }] }] }],
});

describe('held uploads', () => {
  it('take budget for what they sent, not what they announced: an ordinary client beside them keeps getting 200s, and RSS stays bounded', async () => {
    const quiet = rssMiB();
    // 40 clients announce 8 MiB each (32 of them would fill the 256 MiB budget), send 256 KiB and trickle.
    const holders = Array.from({ length: 40 }, () => raw());
    await Promise.all(holders.map(async (holder) => {
      await holder.write(postHead('/v1/traces', 8 * MiB));
      await sendFiller(holder, 256 * 1024);
    }));
    const trickle = setInterval(() => holders.forEach((h) => !h.state.closed && h.socket.write('a')), 300);
    try {
      await eventually(async () => (await inUse()) >= 40 * 256 * 1024, 10_000);
      let peak = rssMiB();
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) {
        const response = await fetch(`${sluice.baseUrl}/v1/traces`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': sluice.apiKey },
          body: smallTraces,
        });
        await response.arrayBuffer();
        statuses.push(response.status);
        peak = Math.max(peak, rssMiB());
      }
      expect(statuses).toEqual(Array(20).fill(200));
      // Generous: 40 × 256 KiB held, against 256 MiB had each taken its Content-Length.
      expect(peak - quiet).toBeLessThan(200);
    } finally {
      clearInterval(trickle);
      holders.forEach((h) => h.destroy());
    }
    await eventually(async () => (await inUse()) === 0, 10_000);
  });

  it('give their memory back once their clients are gone', async () => {
    await delay(500);
    const quiet = rssMiB();
    // 60 clients send all but the last KiB of 4 MiB bodies (240 MiB, within the budget) and hold.
    const holders = Array.from({ length: 60 }, () => raw());
    await Promise.all(holders.map(async (holder) => {
      await holder.write(postHead('/v1/traces', 4 * MiB));
      await sendFiller(holder, 4 * MiB - 1024);
    }));
    await eventually(async () => (await inUse()) >= 60 * (4 * MiB - 1024), 20_000);
    const held = rssMiB() - quiet;
    holders.forEach((h) => h.destroy());
    await eventually(async () => (await inUse()) === 0, 10_000);
    // Nothing else runs: V8 alone would not collect the dropped bodies for a long time.
    let after = rssMiB() - quiet;
    for (const deadline = Date.now() + 20_000; after >= 120 && Date.now() < deadline; after = rssMiB() - quiet) await delay(250);
    expect(held).toBeGreaterThan(150);
    expect(after).toBeLessThan(120); // 240 MiB were held
  });
});

describe('slow and vanishing clients', () => {
  it('cuts a body that does not keep up with the deadline: 408 with Connection: close', async () => {
    const client = raw();
    await client.write(postHead('/v1/traces', 100 * 1024));
    await client.write(Buffer.alloc(1024, 1));
    // 100 bytes every 200 ms: far below 64 KiB/s; within 8 s the deadline (1 s here) must have cut it.
    for (let i = 0; i < 40 && !client.state.received.includes('\r\n\r\n') && !client.state.closed; i++) {
      await client.write(Buffer.alloc(100, 1));
      await delay(200);
    }
    client.destroy();
    expect(client.state.received).toMatch(/^HTTP\/1\.1 408 /);
    expect(client.state.received.toLowerCase()).toContain('connection: close');
    expect(await metric(/^sluice_requests_total\{protocol="http",signal="traces",status="408"\} (\d+)$/m)).toBeGreaterThanOrEqual(1);
  });

  it('counts a request whose client left mid-body as aborted, not as a 500', async () => {
    const client = raw();
    await client.write(postHead('/v1/logs', 4 * MiB));
    // 640 KiB sent earn the body 11 s (1 s + 1 s per 64 KiB), so the deadline cannot cut it with a
    // 408 before the client leaves, however slowly a loaded machine gets there.
    await client.write(Buffer.alloc(640 * 1024, 1));
    await eventually(async () => (await inUse()) > 0, 10_000); // the body is being read
    client.destroy();
    await eventually(async () => (await metric(/^sluice_requests_total\{protocol="http",signal="logs",status="aborted"\} (\d+)$/m)) === 1, 10_000);
    expect(await (await fetch(`${sluice.baseUrl}/metrics`)).text()).not.toMatch(/^sluice_requests_total\{[^}]*status="500"\}/m);
  });
});

describe('a second server on the same ports', () => {
  /** Runs `sluice serve` with `env` until it exits or says it is serving (then stopped): its exit code and stderr. */
  async function secondServe(env: Record<string, string>): Promise<{ code: number | 'serving'; stderr: string }> {
    const dataDir = await mkdtemp(join(tmpdir(), 'sluice-hostile-'));
    try {
      const child = spawn(process.execPath, [SLUICE, 'serve'], {
        env: {
          ...process.env,
          SLUICE_DATA_DIR: dataDir,
          SLUICE_HTTP_ENGINE: sluice.config.http.engine,
          SLUICE_OTLP_HTTP_PORT: '0',
          SLUICE_OTLP_GRPC_PORT: '0',
          SLUICE_RELAY_PORT: '0',
          SLUICE_CONSOLE_PORT: '0',
          ...env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      let serving = false;
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.stdout!.on('data', (chunk: Buffer) => {
        if (!serving && chunk.toString().includes('sluice is serving')) {
          serving = true;
          child.kill('SIGTERM');
        }
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      clearTimeout(timer);
      return { code: serving ? 'serving' : (code ?? -1), stderr };
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }

  it('refuses to start, naming the setting of the port in use (uWebSockets.js would share it)', async () => {
    const [http, relay] = await Promise.all([
      secondServe({ SLUICE_OTLP_HTTP_PORT: String(sluice.httpPort) }),
      secondServe({ SLUICE_RELAY_PORT: String(sluice.relay!.port) }),
    ]);
    expect(http.code).toBe(1);
    expect(http.stderr).toContain('HTTP port (SLUICE_OTLP_HTTP_PORT)');
    expect(relay.code).toBe(1);
    expect(relay.stderr).toContain('relay port (SLUICE_RELAY_PORT)');
    // The first one still answers.
    expect((await fetch(`${sluice.baseUrl}/api/v1/health`)).status).toBe(200);
  }, 120_000);
});

describe('requests the engines treat differently', () => {
  const heartbeat = (agentId: string) => {
    const body = JSON.stringify({ agentId, version: '1.0.0' });
    return `${postHead('/api/v1/heartbeat', Buffer.byteLength(body), 'application/json')}${body}`;
  };

  it('pipelined POSTs: node:http answers each; uWebSockets.js closes at once and stores nothing, so a retry duplicates nothing', async () => {
    const client = raw();
    await client.write(heartbeat('pipelined-1') + heartbeat('pipelined-2'));
    if (sluice.config.http.engine === 'node') {
      await eventually(() => client.statuses().length === 2, 10_000);
      expect(client.statuses()).toEqual([200, 200]);
      client.destroy();
      const rows = await sluice.rows<{ AgentId: string }>("SELECT AgentId FROM otel.agent_heartbeats WHERE AgentId LIKE 'pipelined-%' ORDER BY AgentId");
      expect(rows.map((r) => r.AgentId)).toEqual(['pipelined-1', 'pipelined-2']);
    } else {
      // uWS refuses to parse a request while the one before is unanswered (async pipelining) and closes.
      await eventually(() => client.state.ended, 5_000);
      expect(client.statuses()).toEqual([]);
      await eventually(async () => (await metric(/^sluice_requests_total\{protocol="http",signal="heartbeats",status="aborted"\} (\d+)$/m)) === 1, 10_000);
      const rows = await sluice.rows("SELECT AgentId FROM otel.agent_heartbeats WHERE AgentId LIKE 'pipelined-%'");
      expect(rows).toEqual([]);
    }
  });

  it('answers a body announced over the cap with a 413 the client reads, without a reset while it sends the rest', async () => {
    const client = raw();
    // The head and the first MiB in one write, as curl sends them; then the rest, as a client that reads its answer only at the end.
    await client.write(Buffer.concat([Buffer.from(postHead('/v1/traces', 11 * MiB)), Buffer.alloc(MiB, 0x61)]));
    await sendFiller(client, 10 * MiB);
    await eventually(() => client.state.received.includes('\r\n\r\n') || client.state.closed, 10_000);
    client.destroy();
    expect(client.state.errors).toEqual([]);
    expect(client.state.received).toMatch(/^HTTP\/1\.1 413 /);
    expect(client.state.received.toLowerCase()).toContain('connection: close');
  });

  it('what uWebSockets.js 20.30 cannot parse (HTTP/1.0, no Host, 49 headers, bare LF) gets no answer from it; node:http answers each', async () => {
    const requests = {
      'HTTP/1.0': 'GET /api/v1/health HTTP/1.0\r\n\r\n',
      'no Host': 'GET /api/v1/health HTTP/1.1\r\n\r\n',
      '49 headers': `GET /api/v1/health HTTP/1.1\r\nhost: localhost\r\n${Array.from({ length: 48 }, (_, i) => `x-h${i}: v\r\n`).join('')}\r\n`,
      'bare LF': 'GET /api/v1/health HTTP/1.1\nhost: localhost\n\n',
    };
    const clients = Object.fromEntries(Object.entries(requests).map(([name, request]) => {
      const client = raw();
      void client.write(request);
      return [name, client];
    }));
    await delay(2000);
    const answers = Object.fromEntries(Object.entries(clients).map(([name, client]) => [name, client.statuses()[0] ?? 'none']));
    Object.values(clients).forEach((client) => client.destroy());
    // Documented in docs/reference/http-api.md (Limits of the HTTP ports): uWS keeps such a connection ~10 s, then closes it.
    expect(answers).toEqual(
      sluice.config.http.engine === 'node'
        ? { 'HTTP/1.0': 200, 'no Host': 400, '49 headers': 200, 'bare LF': 400 }
        : { 'HTTP/1.0': 'none', 'no Host': 'none', '49 headers': 'none', 'bare LF': 'none' },
    );
  });
});
