/**
 * The memory budget holds for a real `sluice serve` (its own OS process, started as `npm start`
 * starts it) on the embedded default: with SLUICE_MEMORY_BUDGET_MB at 704 — the smallest that
 * runs with one pool thread is a little less — 48 clients post the bench's spans (100 spans of
 * 20 attributes a request, 74 KB of protobuf) as fast as it answers, which without the budget
 * took it to 1.2 GiB in 20 s. At the budget's storage mark the inserts into chDB wait and the
 * local log (64 MiB here) takes the rows until it is full; at its high-water mark requests are
 * refused. The load lasts 20 s, and on a slower machine until the budget has held inserts and
 * some requests were refused (at most LOAD_MAX_MS). Then:
 *   - its highest resident set (VmHWM) stays within the budget, and it is still running;
 *   - every answer is 200 or 503 + Retry-After, some are 503, the budget held inserts, and
 *     readiness said the process was near or at its budget meanwhile;
 *   - once the local log is drained, exactly the requests answered 200 are stored, every span.
 * A start with a budget too small fails at once, saying the least that runs.
 * Figures are printed at the end. SLUICE_TEST_KEEP=1 keeps the server's log.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTraceTypes, traceRequest } from '../bench/payload.ts';
import { eventually } from './harness.ts';
import { runSluice, startSluiceProcess, type SluiceProcess } from './sluice-processes.ts';

const MiB = 1024 * 1024;
const BUDGET_MB = 704;
const CLIENTS = 48;
const LOAD_MS = 20_000;
/** A slower machine takes longer to reach the storage mark (with 2 cores under stress-ng, 3 to 4 times). */
const LOAD_MAX_MS = 180_000;
const SPANS = 100;
/** Distinct request bodies the clients take turns with (each request gets a name of its own). */
const TEMPLATES = 16;
const MARK = 'req-0000000';

/** MALLOC_MMAP_THRESHOLD_ as `npm start` sets it comes from startSluiceProcess. */
const ENV = {
  SLUICE_MEMORY_BUDGET_MB: String(BUDGET_MB),
  SLUICE_WORKERS: '1',
  SLUICE_RATE_LIMIT_PER_MINUTE: '100000000',
  SLUICE_RATE_LIMIT_BURST: '100000000',
  SLUICE_RETRY_AFTER_SECONDS: '1',
  SLUICE_STORAGE_MAX_PENDING_BYTES: String(64 * 1024 * 1024),
  SLUICE_LOG_LEVEL: 'info',
};

let dir: string;
let server: SluiceProcess;
let apiKey: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-memory-limit-'));
  const dataDir = join(dir, 'data');
  apiKey = JSON.parse(await runSluice(['sources', 'create', '--name', 'burst'], { ...ENV, SLUICE_DATA_DIR: dataDir })).apiKey;
  server = await startSluiceProcess('serve', 'serve', dir, ENV, { dataDir });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  if (process.env.SLUICE_TEST_KEEP) console.log(`kept ${dir}`);
  else await rm(dir, { recursive: true, force: true });
}, 60_000);

/** A /proc/<pid>/status figure in bytes. */
function status(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const kib = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kib) * 1024;
}

const mib = (bytes: number) => `${(bytes / MiB).toFixed(0)} MiB`;

/** Protobuf bodies of the bench's requests, each with a resource attribute `test.request` to patch per request. */
function templates(): Array<{ body: Buffer; at: number }> {
  const types = loadTraceTypes();
  let seed = 42;
  const rand = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
  return Array.from({ length: TEMPLATES }, () => {
    const request = traceRequest(rand as never, SPANS, Date.now());
    request.resourceSpans[0]!.resource.attributes.push({ key: 'test.request', value: { stringValue: MARK } } as never);
    const body = Buffer.from(types.request.encode(types.request.fromObject(request)).finish());
    return { body, at: body.indexOf(MARK) };
  });
}

interface Answer {
  name: string;
  status: number | string;
  retryAfter: string | null;
}

describe('sluice serve with a memory budget under a burst', () => {
  it('stays within its budget, answers 200 or 503 + Retry-After, and stores every span it acknowledged', async () => {
    const pid = server.child.pid!;
    const idle = status(pid, 'VmRSS');
    const bodies = templates();
    const answers: Answer[] = [];
    const details = new Set<string>();
    let next = 0;
    let running = true;
    const client = async () => {
      while (running) {
        const n = next++;
        const name = `req-${String(n).padStart(7, '0')}`;
        const { body: template, at } = bodies[n % bodies.length]!;
        const body = Buffer.from(template);
        body.write(name, at, 'latin1');
        const answer: Answer = { name, status: 0, retryAfter: null };
        try {
          const response = await fetch(`${server.baseUrl}/v1/traces`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-protobuf', 'x-api-key': apiKey },
            body,
            signal: AbortSignal.timeout(30_000),
          });
          await response.arrayBuffer();
          answer.status = response.status;
          answer.retryAfter = response.headers.get('retry-after');
        } catch (err) {
          answer.status = `no answer: ${(err as Error).message}`;
        }
        answers.push(answer);
        // As an exporter does after a refusal, a little (less than Retry-After: the pressure stays).
        if (answer.status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    // What readiness says about memory meanwhile.
    const watch = (async () => {
      while (running) {
        const ready = await fetch(`${server.baseUrl}/api/v1/ready`).then((r) => r.json(), () => undefined);
        if (ready?.components?.memory?.detail) details.add(ready.components.memory.detail.replace(/\d+ MiB/g, 'N MiB'));
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    const clients = Array.from({ length: CLIENTS }, client);
    let peakSampled = idle;
    const started = Date.now();
    let lastLook = started;
    let pressed = false;
    while (Date.now() - started < LOAD_MS || (!pressed && Date.now() - started < LOAD_MAX_MS)) {
      peakSampled = Math.max(peakSampled, status(pid, 'VmRSS'));
      await new Promise((resolve) => setTimeout(resolve, 50));
      if (!pressed && Date.now() - lastLook > 1000) {
        lastLook = Date.now();
        const waits = Number(/^sluice_memory_insert_waits_total (\S+)$/m.exec(await server.metrics())?.[1]);
        pressed = waits > 0 && answers.some((answer) => answer.status === 503);
      }
    }
    const loadMs = Date.now() - started;
    running = false;
    await Promise.all([...clients, watch]);
    const hwm = status(pid, 'VmHWM');

    const statuses = new Map<number | string, number>();
    for (const answer of answers) statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
    const metrics = await server.metrics();
    const figure = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1]);
    console.log(
      [
        `memory-limit figures (budget ${BUDGET_MB} MiB, ${CLIENTS} clients for ${(loadMs / 1000).toFixed(0)} s):`,
        `  RSS idle ${mib(idle)}, highest sampled ${mib(peakSampled)}, VmHWM ${mib(hwm)}`,
        `  answers: ${[...statuses].map(([s, n]) => `${s}: ${n}`).join(', ')}; refused by the memory budget ${figure('sluice_memory_refusals_total')}, inserts held ${figure('sluice_memory_insert_waits_total')}`,
        `  readiness said: ${[...details].join(' | ') || '(nothing)'}`,
      ].join('\n'),
    );

    // Within its budget, and alive.
    expect(hwm, 'VmHWM').toBeLessThanOrEqual(BUDGET_MB * MiB);
    expect(server.child.exitCode, 'still running').toBeNull();
    expect(server.child.signalCode).toBeNull();
    // 200 or 503 + Retry-After; the budget held inserts, and readiness said so.
    expect([...statuses.keys()].filter((s) => s !== 200 && s !== 503)).toEqual([]);
    for (const answer of answers.filter((a) => a.status === 503)) expect(answer.retryAfter, answer.name).toBe('1');
    expect(statuses.get(200)).toBeGreaterThan(100);
    expect(statuses.get(503)).toBeGreaterThan(0);
    expect(figure('sluice_memory_insert_waits_total')).toBeGreaterThan(0);
    expect([...details].some((detail) => /^(near|at) the memory budget/.test(detail))).toBe(true);

    // Exactly the requests answered 200 are stored, each whole, once the local log is drained.
    await eventually(async () => /^sluice_bus_backlog_bytes 0$/m.test(await server.metrics()), 300_000, 500);
    const acknowledged = answers.filter((a) => a.status === 200).map((a) => a.name).sort();
    const out = await runSluice(
      ['query', "SELECT ResourceAttributes['test.request'] AS name, count() AS n FROM otel.otel_traces GROUP BY name ORDER BY name"],
      { SLUICE_DATA_DIR: server.dataDir },
    );
    const rows = out.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { name: string; n: string | number });
    expect(rows.map((row) => row.name)).toEqual(acknowledged);
    for (const row of rows) expect(Number(row.n), row.name).toBe(SPANS);
  }, 600_000);

  it('refuses to start with a budget too small, saying the least that runs', async () => {
    const failed = await runSluice(['serve'], { ...ENV, SLUICE_MEMORY_BUDGET_MB: '500', SLUICE_DATA_DIR: join(dir, 'small') }).then(() => '', (err: Error) => err.message);
    expect(failed).toMatch(/memory\.budgetMb \(SLUICE_MEMORY_BUDGET_MB\): 500 MiB leaves the embedded engine \(chDB\) 0 MiB after .*; this process needs at least \d+ MiB with these options/);
  }, 60_000);
});
