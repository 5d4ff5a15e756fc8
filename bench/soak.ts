/**
 * Soak run: `sluice serve` (the embedded default) under steady mixed traffic — OTLP traces
 * (protobuf), OTLP logs (JSON), agent logs and relay submissions — first quiet, then beside a
 * slice of hostile clients (bench/hostile-clients.ts) that are replaced as they finish. Every
 * few seconds it samples the server's RSS, open descriptors and event-loop lag (p99) and the
 * ordinary clients' success rate and latency; at the end it waits until everything acknowledged
 * is in storage and reconciles: every request answered 2xx stored whole and once, nothing
 * stored twice. It fails (exit 1) on a reconciliation gap, on a 5xx to anyone, or on a growth
 * trend of RSS or descriptors after the warm-up, or when a hostile client holds a connection
 * for HOSTILE_HOLD_MS (45 s) without the server cutting it off.
 *
 * usage: npm run soak -- [--minutes 10] [--rate 40] [--hostile 12] [--engine node|uws] [--out soak.json]
 *   --rate      OTLP trace requests per second (logs and agent logs at half of it, relay submissions at a tenth)
 *   --hostile   hostile clients at once once the quiet phase (a tenth of the run, at least 30 s) is over
 */
import { readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { encodeTraces, traceRequest } from '../test/otlp-fixtures.ts';
import { HOSTILE_KINDS, type HostileTarget } from './hostile-clients.ts';
import { quantile } from './open-loop.ts';
import { rssMiB, startTarget, type RunningTarget } from './target.ts';

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    rate: { type: 'string', default: '40' },
    hostile: { type: 'string', default: '12' },
    engine: { type: 'string', default: 'node' },
    out: { type: 'string' },
  },
});
const MINUTES = Number(args.minutes);
const RATE = Number(args.rate);
const HOSTILE = Number(args.hostile);
const SAMPLE_MS = 5000;
const SPANS = 20;
const LOG_RECORDS = 10;
const AGENT_ENTRIES = 10;
/** How long a hostile client holds on at most before it gives up and another takes its place. */
const HOSTILE_HOLD_MS = 45_000;
const ORIGIN = 'https://soak.example';

interface Stream {
  name: string;
  /** Requests per second. */
  rate: number;
  /** Rows each request stores, and the table and column its marker is read back from. */
  rows: number;
  table: string;
  marker: string;
  send(marker: string): Promise<Response>;
}

interface Window {
  sent: number;
  ok: number;
  failed: Record<string, number>;
  latencies: number[];
}

interface Sample {
  atSeconds: number;
  phase: 'quiet' | 'hostile';
  rssMiB: number;
  fds: { sockets: number; files: number };
  eventLoopLagP99Ms: number;
  ordinary: { sent: number; ok: number; p99Ms: number; failed: Record<string, number> };
  hostileOutcomes: Record<string, number>;
}

const newWindow = (): Window => ({ sent: 0, ok: 0, failed: {}, latencies: [] });
const count = (into: Record<string, number>, key: string) => void (into[key] = (into[key] ?? 0) + 1);

/** The p-th percentile (0–100) of unsorted values; 0 for none. */
function percentile(values: number[], p: number): number {
  return values.length === 0 ? 0 : quantile([...values].sort((a, b) => a - b), p / 100);
}

const median = (values: number[]) => percentile(values, 50);

/** Open descriptors: sockets (connections, which hostile clients could leave behind) and the rest (chDB's part files, the log). */
function descriptors(pid: number): { sockets: number; files: number } {
  let sockets = 0;
  let files = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) sockets++;
      else files++;
    } catch {
      // closed meanwhile
    }
  }
  return { sockets, files };
}


async function eventLoopLagP99Ms(url: string): Promise<number> {
  const metrics = await (await fetch(`${url}/metrics`)).text();
  return Number(/^nodejs_eventloop_lag_p99_seconds ([\d.e+-]+)$/m.exec(metrics)?.[1] ?? NaN) * 1000;
}

/** The relay form submissions go to: a tenant, a site allowing ORIGIN, a form without recipients. */
async function relaySite(target: RunningTarget): Promise<string> {
  const { tenant } = (await target.cli('relay', 'onboard', '--tenant', 'Soak', '--owner', 'owner@soak.example')) as { tenant: { id: string } };
  const site = (await target.cli('relay', 'sites', 'create', '--tenant', tenant.id, '--name', 'Soak', '--origin', ORIGIN)) as { id: string; siteKey: string };
  await target.cli('relay', 'forms', 'create', '--site', site.id, '--name', 'Contact', '--key', 'contact');
  return site.siteKey;
}

function streams(target: RunningTarget, siteKey: string): Stream[] {
  const key = target.headers['x-api-key']!;
  const post = (url: string, contentType: string, body: Uint8Array<ArrayBuffer> | string, headers: Record<string, string> = { 'x-api-key': key }) =>
    fetch(url, { method: 'POST', headers: { 'content-type': contentType, ...headers }, body, signal: AbortSignal.timeout(30_000) });
  return [
    {
      name: 'otlp-traces', rate: RATE, rows: SPANS, table: 'otel_traces', marker: 'ServiceName',
      send: (marker) => post(`${target.url}/v1/traces`, 'application/x-protobuf', encodeTraces(traceRequest({ spans: SPANS, service: marker }))),
    },
    {
      name: 'otlp-logs', rate: RATE / 2, rows: LOG_RECORDS, table: 'otel_logs', marker: 'ServiceName',
      send: (marker) => {
        const now = String(BigInt(Date.now()) * 1_000_000n);
        const logRecords = Array.from({ length: LOG_RECORDS }, (_, i) => ({ timeUnixNano: now, severityText: 'INFO', body: { stringValue: `soak line ${i}` } }));
        const body = { resourceLogs: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: marker } }] }, scopeLogs: [{ logRecords }] }] };
        return post(`${target.url}/v1/logs`, 'application/json', JSON.stringify(body));
      },
    },
    {
      name: 'agent-logs', rate: RATE / 2, rows: AGENT_ENTRIES, table: 'agent_logs', marker: 'Service',
      send: (marker) => {
        const entries = Array.from({ length: AGENT_ENTRIES }, (_, i) => ({ level: 'info', message: `soak entry ${i}` }));
        return post(`${target.url}/api/v1/ingest`, 'application/json', JSON.stringify({ host: 'soak', service: marker, entries }));
      },
    },
    {
      name: 'relay-submissions', rate: Math.max(1, RATE / 10), rows: 1, table: 'relay_submissions', marker: "JSONExtractString(Data, 'marker')",
      send: (marker) =>
        post(`${target.relayUrl}/api/v1/submissions`, 'application/json', JSON.stringify({ siteKey, formKey: 'contact', data: { marker, message: 'soak' } }), { origin: ORIGIN }),
    },
  ];
}

async function main(): Promise<void> {
  // As `npm start` runs it (glibc gives freed body blocks back to the system).
  const target = await startTarget(args.engine === 'uws' ? 'sluice-uws' : 'sluice', { SLUICE_RELAY_SUBMISSIONS_PER_MINUTE: '100000000', MALLOC_MMAP_THRESHOLD_: '131072' });
  const stopAt = performance.now() + MINUTES * 60_000;
  const quietUntil = performance.now() + Math.max(30_000, (MINUTES * 60_000) / 10);
  const acknowledged = new Map<string, Set<string>>();
  const unanswered = new Map<string, Set<string>>();
  const serverErrors: string[] = [];
  let window = newWindow();
  const quietLatencies: number[] = [];
  const hostileLatencies: number[] = [];
  let hostileOutcomes: Record<string, number> = {};
  const samples: Sample[] = [];
  const inFlight = new Set<Promise<unknown>>();
  const track = <T>(work: Promise<T>) => {
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  };

  try {
    const siteKey = await relaySite(target);
    const hostileTarget: HostileTarget = { host: '127.0.0.1', httpPort: Number(new URL(target.url).port), grpcPort: target.grpcPort, apiKey: target.headers['x-api-key']! };
    const started = performance.now();
    const timers: NodeJS.Timeout[] = [];

    // Ordinary clients: requests at even intervals, each with a marker of its own, latency from the scheduled time.
    for (const stream of streams(target, siteKey)) {
      acknowledged.set(stream.name, new Set());
      unanswered.set(stream.name, new Set());
      let n = 0;
      const interval = 1000 / stream.rate;
      let next = performance.now();
      const tick = () => {
        while (performance.now() >= next && performance.now() < stopAt) {
          const scheduled = next;
          next += interval;
          const marker = `soak-${stream.name}-${n++}`;
          window.sent++;
          track(
            stream.send(marker).then(
              async (response) => {
                await response.arrayBuffer();
                const latency = performance.now() - scheduled;
                window.latencies.push(latency);
                (performance.now() < quietUntil ? quietLatencies : hostileLatencies).push(latency);
                if (response.status >= 200 && response.status < 300) {
                  window.ok++;
                  acknowledged.get(stream.name)!.add(marker);
                } else {
                  count(window.failed, String(response.status));
                  unanswered.get(stream.name)!.add(marker);
                  if (response.status >= 500 && response.status !== 503) serverErrors.push(`${stream.name}: ${response.status}`);
                }
              },
              (err: Error) => {
                count(window.failed, err.name);
                unanswered.get(stream.name)!.add(marker);
              },
            ),
          );
        }
      };
      timers.push(setInterval(tick, Math.max(1, Math.min(50, interval / 2))));
    }

    // Hostile clients, from the end of the quiet phase: each slot runs the kinds in turn.
    const kinds = Object.entries(HOSTILE_KINDS);
    let hostileRound = 0;
    const hostileSlot = async () => {
      while (performance.now() < quietUntil) await new Promise((resolve) => setTimeout(resolve, 500));
      while (performance.now() < stopAt) {
        const [name, kind] = kinds[hostileRound++ % kinds.length]!;
        const holdMs = Math.min(HOSTILE_HOLD_MS, Math.max(1000, stopAt - performance.now()));
        let outcome = await kind(hostileTarget, holdMs).catch((err: Error) => `error:${err.message}`);
        if (outcome === 'held' && holdMs < HOSTILE_HOLD_MS) outcome = 'held until the run ended';
        count(hostileOutcomes, `${name} ${outcome}`);
        if (/answered:5\d\d/.test(outcome) && !outcome.endsWith(':503')) serverErrors.push(`hostile ${name}: ${outcome}`);
      }
    };
    const hostile = Promise.all(Array.from({ length: HOSTILE }, hostileSlot));

    // Samples.
    const sampling: Promise<void>[] = [];
    const takeSample = () => {
      const taken = window;
      window = newWindow();
      const outcomes = hostileOutcomes;
      hostileOutcomes = {};
      const sampled = eventLoopLagP99Ms(target.url).catch(() => NaN).then((lag) => {
        const sample: Sample = {
          atSeconds: Math.round((performance.now() - started) / 1000),
          phase: performance.now() < quietUntil ? 'quiet' : 'hostile',
          rssMiB: Math.round(rssMiB(target.pid)),
          fds: descriptors(target.pid),
          eventLoopLagP99Ms: Math.round(lag * 10) / 10,
          ordinary: { sent: taken.sent, ok: taken.ok, p99Ms: Math.round(percentile(taken.latencies, 99)), failed: taken.failed },
          hostileOutcomes: outcomes,
        };
        samples.push(sample);
        process.stderr.write(`${JSON.stringify(sample)}\n`);
      });
      sampling.push(sampled);
    };
    const sampler = setInterval(takeSample, SAMPLE_MS);

    await new Promise((resolve) => setTimeout(resolve, Math.max(0, stopAt - performance.now())));
    for (const timer of timers) clearInterval(timer);
    await hostile;
    await Promise.allSettled([...inFlight]);
    clearInterval(sampler);
    // What came in after the last tick counts too, and every sample is in before the report.
    takeSample();
    await Promise.all(sampling);

    // After the attack: memory given back?
    await new Promise((resolve) => setTimeout(resolve, 15_000));
    const rssAfterMiB = Math.round(rssMiB(target.pid));
    const fdsAfter = descriptors(target.pid);

    await target.drained();
    const reconciliation = await reconcile(target, streams(target, siteKey), acknowledged, unanswered);
    const report = summarize(samples, reconciliation, serverErrors, quietLatencies, hostileLatencies, { rssAfterMiB, fdsAfter });
    if (args.out) writeFileSync(args.out, JSON.stringify({ args: { MINUTES, RATE, HOSTILE, engine: args.engine }, report, samples }, null, 2));
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    process.exitCode = report.failures.length === 0 ? 0 : 1;
  } finally {
    await target.stop();
  }
}

interface StreamReconciliation {
  acknowledged: number;
  storedWhole: number;
  /** Acknowledged and not (wholly) stored: loss. */
  missing: number;
  /** Stored more than once, or a part of a request. */
  duplicated: number;
  partial: number;
  /** Not acknowledged (refused, timed out) yet stored whole: allowed (the client retries; at-least-once). */
  unacknowledgedStored: number;
}

async function reconcile(target: RunningTarget, all: Stream[], acknowledged: Map<string, Set<string>>, unanswered: Map<string, Set<string>>): Promise<Record<string, StreamReconciliation>> {
  const out: Record<string, StreamReconciliation> = {};
  for (const stream of all) {
    const sql = `SELECT groupArray((m, c)) AS rows FROM (SELECT ${stream.marker} AS m, count() AS c FROM otel.${stream.table} WHERE m LIKE 'soak-${stream.name}-%' GROUP BY m)`;
    const [row] = [(await target.cli('query', sql)) as { rows: Array<[string, number | string]> }];
    const stored = new Map(row!.rows.map(([marker, n]) => [marker, Number(n)]));
    const acked = acknowledged.get(stream.name)!;
    const result: StreamReconciliation = { acknowledged: acked.size, storedWhole: 0, missing: 0, duplicated: 0, partial: 0, unacknowledgedStored: 0 };
    for (const marker of acked) if (stored.get(marker) !== stream.rows) result.missing++;
    for (const [marker, n] of stored) {
      if (n === stream.rows) {
        result.storedWhole++;
        if (!acked.has(marker) && unanswered.get(stream.name)!.has(marker)) result.unacknowledgedStored++;
      } else if (n > stream.rows) result.duplicated++;
      else result.partial++;
    }
    out[stream.name] = result;
  }
  return out;
}

function summarize(
  samples: Sample[],
  reconciliation: Record<string, StreamReconciliation>,
  serverErrors: string[],
  quietLatencies: number[],
  hostileLatencies: number[],
  after: { rssAfterMiB: number; fdsAfter: { sockets: number; files: number } },
) {
  const failures: string[] = [];
  for (const [name, r] of Object.entries(reconciliation)) {
    if (r.missing > 0) failures.push(`${name}: ${r.missing} acknowledged requests not stored whole`);
    if (r.duplicated > 0) failures.push(`${name}: ${r.duplicated} requests stored more than once`);
    if (r.partial > 0) failures.push(`${name}: ${r.partial} requests stored in part`);
  }
  const held = Object.entries(hostileTotals(samples)).filter(([outcome]) => outcome.endsWith(' held'));
  if (held.length > 0) failures.push(`hostile clients held on for ${HOSTILE_HOLD_MS / 1000} s without being cut off: ${held.map(([k, n]) => `${k} ×${n}`).join(', ')}`);
  if (serverErrors.length > 0) failures.push(`${serverErrors.length} answers 5xx other than 503: ${[...new Set(serverErrors)].slice(0, 5).join('; ')}`);

  // Growth: after a warm-up of a fifth of the hostile phase, the last third's median against the first third's.
  const hostile = samples.filter((s) => s.phase === 'hostile');
  const steady = hostile.slice(Math.floor(hostile.length / 5));
  const third = Math.max(1, Math.floor(steady.length / 3));
  const early = steady.slice(0, third);
  const late = steady.slice(-third);
  const growth = {
    rssMiB: { early: median(early.map((s) => s.rssMiB)), late: median(late.map((s) => s.rssMiB)) },
    sockets: { early: median(early.map((s) => s.fds.sockets)), late: median(late.map((s) => s.fds.sockets)) },
    files: { early: median(early.map((s) => s.fds.files)), late: median(late.map((s) => s.fds.files)) },
  };
  if (steady.length >= 6) {
    if (growth.rssMiB.late > growth.rssMiB.early * 1.15 + 48) failures.push(`RSS grew from ${growth.rssMiB.early} to ${growth.rssMiB.late} MiB over the run`);
    // Sockets only: storage's open files follow its parts and merges, not the clients.
    if (growth.sockets.late > growth.sockets.early + 32) failures.push(`open sockets grew from ${growth.sockets.early} to ${growth.sockets.late}`);
  }
  const ordinary = samples.reduce((sum, s) => ({ sent: sum.sent + s.ordinary.sent, ok: sum.ok + s.ordinary.ok }), { sent: 0, ok: 0 });
  const quietP99 = percentile(quietLatencies, 99);
  const hostileP99 = percentile(hostileLatencies, 99);
  return {
    failures,
    ordinary: {
      sent: ordinary.sent,
      ok: ordinary.ok,
      successRate: ordinary.sent === 0 ? 0 : Math.round((ordinary.ok / ordinary.sent) * 10000) / 10000,
      p99MsQuiet: Math.round(quietP99),
      p99MsBesideHostile: Math.round(hostileP99),
      p99Factor: quietP99 === 0 ? 0 : Math.round((hostileP99 / quietP99) * 10) / 10,
    },
    rssMiB: { quiet: median(samples.filter((s) => s.phase === 'quiet').map((s) => s.rssMiB)), peak: Math.max(...samples.map((s) => s.rssMiB)), ...growth.rssMiB, afterAttack: after.rssAfterMiB },
    sockets: { peak: Math.max(...samples.map((s) => s.fds.sockets)), ...growth.sockets, afterAttack: after.fdsAfter.sockets },
    files: { peak: Math.max(...samples.map((s) => s.fds.files)), ...growth.files, afterAttack: after.fdsAfter.files },
    eventLoopLagP99Ms: { median: median(samples.map((s) => s.eventLoopLagP99Ms)), max: Math.max(...samples.map((s) => s.eventLoopLagP99Ms)) },
    hostileOutcomes: hostileTotals(samples),
    reconciliation,
  };
}

function hostileTotals(samples: Sample[]): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const sample of samples) for (const [outcome, n] of Object.entries(sample.hostileOutcomes)) totals[outcome] = (totals[outcome] ?? 0) + n;
  return totals;
}

await main();
