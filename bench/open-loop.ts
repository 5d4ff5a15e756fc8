/**
 * Open-loop load: requests start at even intervals at a fixed rate, whatever the server does, and
 * each one's latency runs from the moment it was *scheduled*, not the moment it left. A request
 * that waits for a free connection in the pool, or behind a late timer in this process, or for a
 * stalled server, is late by that much — nothing is left out of the figures (no coordinated
 * omission). autocannon's `-R` does not do this: it sends in bursts and times from the send.
 *
 * The pool is a node:http keep-alive Agent of `connections` sockets, opened as needed; past them,
 * requests queue in the Agent, and that queueing counts as latency. Idle sockets are closed by the
 * generator before the server would close them (`openLoopPool`).
 *
 * usage (against a running server):
 *   node --import tsx bench/open-loop.ts --url http://127.0.0.1:4318/v1/traces --rate 200 \
 *        [--duration 10] [--connections 256] [--header 'x-api-key: …']
 *   sends bench/payload.ts's OTLP trace bodies (protobuf + gzip) and prints the result as JSON.
 */
import { Agent, request } from 'node:http';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

export interface OpenLoopOptions {
  /** Full URL of the endpoint, e.g. http://127.0.0.1:4318/v1/traces. */
  url: string;
  headers: Record<string, string>;
  /** POSTed in rotation. */
  bodies: Buffer[];
  /** Headers made per request (n counts from 0). */
  perRequestHeaders?: (n: number) => Record<string, string>;
  /** Requests per second, evenly spaced. */
  rate: number;
  /** Seconds of sending; the run then waits for the answers. */
  duration: number;
  /** Keep-alive sockets at most. */
  connections: number;
  /** A request not answered this long after it was scheduled fails as a timeout. Default 10 s. */
  timeoutMs?: number;
  /**
   * A keep-alive pool the caller owns (and destroys), so that a warm-up run and the measured
   * run after it share their connections; by default each run has its own.
   */
  agent?: Agent;
}

export interface OpenLoopResult {
  /** The rate asked for and the rate answers came at (answers / seconds from the first send to the last answer). */
  rate: number;
  achievedRate: number;
  /** Requests scheduled (all of them were sent), and answered with any status. */
  sent: number;
  answered: number;
  /** 2xx answers. */
  ok: number;
  seconds: number;
  /** Scheduled time to the end of the answer, over every answered request (any status), ms. */
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
  /**
   * The p99 of the requests scheduled in each second of the run (NaN for a second with no
   * answer): a tail that is one bad second (a start, a stall) looks different from a steady one.
   */
  p99BySecondMs: number[];
  statusCodes: Record<string, number>;
  /** Requests that got no answer, by reason (timeout, ECONNRESET...). */
  errors: Record<string, number>;
  /** Most requests in flight at once (sent, not answered); above `connections` some waited in the pool. */
  peakInFlight: number;
  /** How late this process's timer was at worst in starting a request (ms): a busy generator shows here. */
  maxTimerLagMs: number;
}

/** How long the generator keeps an idle socket when the server announces no keep-alive timeout. */
const IDLE_SOCKET_MS = 5000;

/**
 * The open loop's keep-alive pool: up to `connections` sockets, each closed once idle for
 * `idleMs`, or a second before the keep-alive timeout the server announces (`Keep-Alive:
 * timeout=N`) if that is sooner. A socket the server closes for idleness just as a request goes
 * out on it fails that request with ECONNRESET: a race between the two ends' timers that the
 * report would count as the server's error. (node:http applies the server's hint only to an Agent
 * that has a timeout of its own; the timeout closes free sockets only, not requests in flight.)
 */
export function openLoopPool(connections: number, idleMs = IDLE_SOCKET_MS): Agent {
  return new Agent({ keepAlive: true, maxSockets: connections, timeout: idleMs });
}

export function quantile(sorted: ArrayLike<number>, q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN;
}

export async function openLoop(opts: OpenLoopOptions): Promise<OpenLoopResult> {
  const agent = opts.agent ?? openLoopPool(opts.connections);
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const interval = 1000 / opts.rate;
  const total = Math.max(1, Math.round(opts.rate * opts.duration));
  const latencies = new Float64Array(total);
  const secondOf = new Uint32Array(total); // the second each answered request was scheduled in
  const statusCodes: Record<string, number> = {};
  const errors: Record<string, number> = {};
  let answered = 0;
  let ok = 0;
  let inFlight = 0;
  let peakInFlight = 0;
  let maxTimerLagMs = 0;
  let lastAnswerAt = 0;
  const start = performance.now();

  const send = (n: number, scheduled: number) =>
    new Promise<void>((resolve) => {
      const body = opts.bodies[n % opts.bodies.length]!;
      const headers = { ...opts.headers, ...opts.perRequestHeaders?.(n), 'content-length': String(body.length) };
      const req = request(opts.url, { method: 'POST', agent, headers });
      inFlight++;
      peakInFlight = Math.max(peakInFlight, inFlight);
      let finished = false;
      const finish = (status: number | string) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        inFlight--;
        if (typeof status === 'number') {
          const now = performance.now();
          secondOf[answered] = Math.floor((scheduled - start) / 1000);
          latencies[answered++] = now - scheduled;
          lastAnswerAt = now;
          statusCodes[status] = (statusCodes[status] ?? 0) + 1;
          if (status >= 200 && status < 300) ok++;
        } else {
          errors[status] = (errors[status] ?? 0) + 1;
        }
        resolve();
      };
      // The deadline counts from the scheduled time, like the latency.
      const timer = setTimeout(() => req.destroy(Object.assign(new Error('timeout'), { code: 'timeout' })), timeoutMs - (performance.now() - scheduled));
      req.on('response', (res) => {
        res.on('error', (err: NodeJS.ErrnoException) => finish(err.code ?? 'aborted'));
        res.on('end', () => finish(res.statusCode ?? 0));
        res.resume();
      });
      req.on('error', (err: NodeJS.ErrnoException) => finish(err.code ?? err.message));
      req.end(body);
    });

  const pending: Promise<void>[] = [];
  await new Promise<void>((done) => {
    let issued = 0;
    const tick = () => {
      const now = performance.now();
      // Every request whose time has come starts now, however late the timer fired.
      if (issued < total) maxTimerLagMs = Math.max(maxTimerLagMs, now - (start + issued * interval));
      while (issued < total && start + issued * interval <= now) {
        pending.push(send(issued, start + issued * interval));
        issued++;
      }
      if (issued >= total) return done();
      setTimeout(tick, start + issued * interval - performance.now());
    };
    tick();
  });
  await Promise.all(pending);
  if (!opts.agent) agent.destroy();

  const bySecond: number[][] = Array.from({ length: Math.floor(((total - 1) * interval) / 1000) + 1 }, () => []);
  for (let i = 0; i < answered; i++) bySecond[secondOf[i]!]?.push(latencies[i]!);
  const sorted = latencies.subarray(0, answered).sort();
  const seconds = (Math.max(lastAnswerAt, start + opts.duration * 1000) - start) / 1000;
  return {
    rate: opts.rate,
    achievedRate: answered / seconds,
    sent: total,
    answered,
    ok,
    seconds,
    latencyMs: {
      p50: quantile(sorted, 0.5),
      p90: quantile(sorted, 0.9),
      p99: quantile(sorted, 0.99),
      max: answered ? sorted[answered - 1]! : NaN,
      mean: answered ? sorted.reduce((sum, v) => sum + v, 0) / answered : NaN,
    },
    p99BySecondMs: bySecond.map((second) => quantile(second.sort((a, b) => a - b), 0.99)),
    statusCodes,
    errors,
    peakInFlight,
    maxTimerLagMs,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      url: { type: 'string' },
      rate: { type: 'string' },
      duration: { type: 'string', default: '10' },
      connections: { type: 'string', default: '256' },
      header: { type: 'string', multiple: true, default: [] },
    },
    strict: true,
  });
  if (!values.url || !values.rate) throw new Error('usage: open-loop.ts --url <url> --rate <req/s> [--duration 10] [--connections 256] [--header "name: value"]...');
  const { loadTraceTypes, traceBodies } = await import('./payload.ts');
  const headers: Record<string, string> = { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' };
  for (const h of values.header) {
    const colon = h.indexOf(':');
    headers[h.slice(0, colon).trim().toLowerCase()] = h.slice(colon + 1).trim();
  }
  const result = await openLoop({
    url: values.url,
    headers,
    bodies: traceBodies(loadTraceTypes(), 64, 100).bodies,
    rate: Number(values.rate),
    duration: Number(values.duration),
    connections: Number(values.connections),
  });
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) await main();
