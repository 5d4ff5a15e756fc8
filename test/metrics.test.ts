/**
 * GET /metrics as Prometheus reads it: a running `sluice serve`, after OTLP traffic over HTTP and
 * gRPC, serves its metrics on the ingest port and on the relay port, and `promtool check metrics`
 * (Prometheus's own linter: names, help, units, counters ending in _total) finds no problem in
 * either. The example alert rules pass `promtool check rules`, name only metrics Sluice serves,
 * and docs/guides/operating.md shows them as they are in deploy/prometheus/sluice-alerts.yml.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';
import { exportOnce, exporterFor, finishedSpans } from './otel-clients.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RULES = 'deploy/prometheus/sluice-alerts.yml';
/** The page that shows the rules (Metrics, Example alert rules). */
const OPERATING = 'docs/guides/operating.md';

/** Runs promtool with `input` on stdin; its exit code and everything it printed. */
function promtool(args: string[], input = ''): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('promtool', args, { cwd: ROOT });
    let output = '';
    child.stdout.on('data', (data) => (output += data));
    child.stderr.on('data', (data) => (output += data));
    child.on('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'ENOENT' ? new Error('promtool is not installed (Debian package prometheus): run `sudo bash deploy/services.sh`') : err));
    child.on('close', (code) => resolve({ code: code ?? -1, output }));
    child.stdin.end(input);
  });
}

/** The value of one sample line (`name{labels}` exactly as Sluice writes it), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

let sluice: TestSluice;
const scrape = async (url: string) => {
  const response = await fetch(url);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return response.text();
};
const ingestMetrics = () => scrape(`${sluice.baseUrl}/metrics`);
const relayMetrics = () => scrape(`http://127.0.0.1:${sluice.relay!.port}/metrics`);

beforeAll(async () => {
  sluice = await startTestSluice();
  // Some of every kind: spans over both transports (counters with values), and stored (the consumer's).
  for (const [protocol, spans] of [['http/protobuf', 7], ['grpc', 5]] as const) {
    const result = await exportOnce(exporterFor<ReadableSpan[]>('traces', protocol, sluice), finishedSpans(`metrics-${protocol}`, spans));
    expect(result.code, `${protocol} export`).toBe(0);
  }
  await eventually(async () => (sample(await ingestMetrics(), 'sluice_consumer_rows_total') ?? 0) >= 12);
});

afterAll(async () => {
  await sluice?.stop();
});

describe('GET /metrics', () => {
  it('counts items per signal and transport, and the storage consumer with counters of its own', async () => {
    // The consumer also stores the ingest_counts rows of the ingest tally's flushes (every 10 s on
    // the wall clock), and counts a batch once all its tables are in: read until a batch is whole.
    const text = await eventually(async () => {
      const scraped = await ingestMetrics();
      const inserted = scraped.split('\n').filter((line) => line.startsWith('sluice_storage_rows_inserted_total{')).reduce((sum, line) => sum + Number(line.split(' ')[1]), 0);
      const whole = sample(scraped, 'sluice_consumer_rows_total') === inserted && sample(scraped, 'sluice_consumer_batches_total')! >= 1;
      return whole ? scraped : undefined;
    });
    expect(sample(text, 'sluice_items_accepted_total{signal="traces",transport="http"}')).toBe(7);
    expect(sample(text, 'sluice_items_accepted_total{signal="traces",transport="grpc"}')).toBe(5);
    expect(sample(text, 'sluice_items_received_total{signal="traces",transport="grpc"}')).toBe(5);
    expect(text).toMatch(/^# TYPE sluice_consumer_batches_total counter$/m);
    expect(sample(text, 'sluice_storage_rows_inserted_total{table="otel_traces"}')).toBe(12);
    expect(sample(text, 'sluice_consumer_dead_lettered_total')).toBe(0);
    // Embedded: the local log's backlog against its limit (SLUICE_STORAGE_MAX_PENDING_BYTES).
    expect(sample(text, 'sluice_bus_backlog_limit_bytes')).toBe(sluice.config.storage.maxPendingBytes);
    // No gauge carries totals any more.
    expect(text).not.toMatch(/^# TYPE sluice_consumer gauge$/m);
  });

  it('shows what runs: sluice_build_info, and the process and Node.js runtime figures', async () => {
    const text = await ingestMetrics();
    const { version } = JSON.parse(await readFile(`${ROOT}/package.json`, 'utf8')) as { version: string };
    // The tests run with Node's --disable-wasm-trap-handler (vitest.config.ts), as Sluice does: the WebAssembly transcoder.
    expect(sample(text, `sluice_build_info{version="${version}",node_version="${process.version}",http_engine="${sluice.config.http.engine}",transcoder="wasm"}`)).toBe(1);
    for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_open_fds', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_p99_seconds']) {
      expect(text, name).toMatch(new RegExp(`^${name} [0-9.e+-]+$`, 'm'));
    }
  });

  it('passes `promtool check metrics`, on the ingest port and on the relay port', async () => {
    const ingest = await ingestMetrics();
    expect(await promtool(['check', 'metrics'], ingest)).toEqual({ code: 0, output: '' });
    const relay = await relayMetrics();
    // The same registry: one process, one set of metrics, whichever port is scraped.
    expect(sample(relay, 'sluice_items_accepted_total{signal="traces",transport="grpc"}')).toBe(5);
    expect(await promtool(['check', 'metrics'], relay)).toEqual({ code: 0, output: '' });
  });

  it('answers GET only on the relay port (405 with Allow: GET)', async () => {
    const response = await fetch(`http://127.0.0.1:${sluice.relay!.port}/metrics`, { method: 'POST' });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET');
  });
});

describe(`the example alert rules (${RULES})`, () => {
  it('pass `promtool check rules`', async () => {
    const { code, output } = await promtool(['check', 'rules', RULES]);
    expect(output).toContain('SUCCESS: 9 rules found');
    expect(code).toBe(0);
  });

  it('name only metrics that Sluice serves', async () => {
    const rules = await readFile(`${ROOT}/${RULES}`, 'utf8');
    const exprs = [...rules.matchAll(/expr: (\|\n(?: {10}.*\n)+|.*\n)/g)].map((m) => m[1]!).join('\n');
    const named = new Set(exprs.match(/\b(?:sluice|nodejs|process)_[a-z0-9_]+/g));
    expect(named.size).toBeGreaterThan(5);
    const served = new Set([...(await ingestMetrics()).matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    expect([...named].filter((name) => !served.has(name))).toEqual([]);
  });

  it('are in docs/guides/operating.md as they are in the file', async () => {
    const [page, rules] = await Promise.all([readFile(`${ROOT}/${OPERATING}`, 'utf8'), readFile(`${ROOT}/${RULES}`, 'utf8')]);
    expect(page.includes('```yaml\n' + rules + '```\n'), `${OPERATING} has no yaml block equal to ${RULES}`).toBe(true);
  });
});
