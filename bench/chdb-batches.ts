/**
 * What chDB costs per span on the embedded default, merges included, by insert batch size and
 * table settings: a fresh data dir, the real schema (migrations), `--spans` spans of
 * bench/payload.ts transcoded to RowBinary up front, inserted through ChdbStorage in batches of
 * `--batch-mb`, then waiting until background merges are done (no merge running and the part
 * count unchanged for 3 s). Reports the process's CPU seconds (all threads: chDB's inserts and
 * merges) per million spans, for the inserts and for the merges after them, and the parts left.
 *
 *   node --import tsx bench/chdb-batches.ts [--spans 1000000] [--batch-mb 32] [--days 1] [--setting name=value ...]
 *
 * `--days N` spreads the requests over N days, one day per request (100 spans): a batch then
 * spans as many daily partitions as it holds requests, up to N, each a part of its own (what a
 * batch of many requests within the per-request limit of 100 days can cost).
 *
 * `--setting` applies a MergeTree setting to every table (ALTER TABLE … MODIFY SETTING) before
 * the inserts, to measure it: e.g. `--setting fsync_after_insert=1`. `--sql` runs a statement
 * first (to measure what a part of the schema costs: `--sql 'ALTER TABLE otel.otel_traces DROP INDEX idx_span_attr_value'`).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { transcodeOtlp } from '../pipeline/otlp/index.ts';
import { ChdbStorage } from '../storage/chdb.ts';
import { queryRows } from '../storage/storage.ts';
import { loadTraceTypes, traceBodies } from './payload.ts';

const { values } = parseArgs({
  options: {
    spans: { type: 'string', default: '1000000' },
    'batch-mb': { type: 'string', default: '32' },
    days: { type: 'string', default: '1' },
    setting: { type: 'string', multiple: true, default: [] },
    sql: { type: 'string', multiple: true, default: [] },
  },
});
const spans = Number(values.spans);
const batchBytes = Number(values['batch-mb']) * 1024 * 1024;

const cpuSeconds = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

const days = Number(values.days);
const { bodies } = traceBodies(loadTraceTypes(), Math.max(64, days), 100, 1, days);
const chunks = bodies.map((body) => transcodeOtlp('traces', 'protobuf', gunzipSync(body), 'bench').tables[0]!);
const dir = await mkdtemp(join(tmpdir(), 'sluice-chdb-batches-'));
const storage = new ChdbStorage(dir, 'otel');
try {
  await storage.start();
  const tables = await queryRows<{ name: string }>(storage, "SELECT name FROM system.tables WHERE database = 'otel' AND engine LIKE '%MergeTree'");
  for (const setting of values.setting) {
    for (const { name } of tables) await storage.query(`ALTER TABLE otel.\`${name}\` MODIFY SETTING ${setting}`);
  }

  for (const statement of values.sql) await storage.query(statement);

  const started = cpuSeconds();
  const wallStarted = performance.now();
  let sent = 0;
  let inserts = 0;
  while (sent < spans) {
    const batch = [];
    let bytes = 0;
    while (bytes < batchBytes && sent < spans) {
      const chunk = chunks[(sent / 100) % chunks.length]!;
      batch.push(chunk.data);
      bytes += chunk.data.byteLength;
      sent += chunk.rows;
    }
    await storage.insert({ table: 'otel_traces', columns: chunks[0]!.columns, chunks: batch });
    inserts++;
  }
  const insertCpu = cpuSeconds() - started;
  const insertWall = (performance.now() - wallStarted) / 1000;

  // Merges run in the background after the inserts: wait until they are done.
  const mergeStarted = cpuSeconds();
  let last = '';
  let stableSince = performance.now();
  for (;;) {
    const [{ merges, parts }] = await queryRows<{ merges: string; parts: string }>(
      storage,
      "SELECT (SELECT count() FROM system.merges) AS merges, (SELECT count() FROM system.parts WHERE database = 'otel' AND active) AS parts",
    ) as [{ merges: string; parts: string }];
    const now = `${merges}/${parts}`;
    if (now !== last) {
      last = now;
      stableSince = performance.now();
    } else if (Number(merges) === 0 && performance.now() - stableSince > 3000) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const mergeCpu = cpuSeconds() - mergeStarted;
  const parts = await queryRows<{ table: string; parts: string }>(storage, "SELECT table, count() AS parts FROM system.parts WHERE database = 'otel' AND active GROUP BY table ORDER BY table");
  const perMillion = (seconds: number) => ((seconds / sent) * 1e6).toFixed(2);
  console.log(`chdb-batches: ${sent.toLocaleString('en-US')} spans in ${inserts} inserts of ~${values['batch-mb']} MB over ${days} day(s); settings: ${[...values.setting, ...values.sql].join('; ') || '(schema defaults)'}`);
  console.log(`  inserts: ${perMillion(insertCpu)} CPU-s / M spans (${insertWall.toFixed(1)} s wall)`);
  console.log(`  merges after: ${perMillion(mergeCpu)} CPU-s / M spans (while waiting ~3 s of idle polling included)`);
  console.log(`  total: ${perMillion(insertCpu + mergeCpu)} CPU-s / M spans; parts left: ${parts.map((p) => `${p.table} ${p.parts}`).join(', ')}`);
} finally {
  await storage.shutdown();
  await rm(dir, { recursive: true, force: true });
}
