/**
 * IngestTally: what it counts, the rows it publishes (inserted into a real chDB `ingest_counts`
 * and read back), a refused flush kept for the next one within its bound, and the flush loop.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { TableChunk } from '../bus/bus.ts';
import { SluiceError } from '../core/errors.ts';
import { capturedLog } from '../test/faults.ts';
import { RefusedAfterDecoding } from './ingest.ts';
import { IngestTally } from './ingest-tally.ts';
import { ChdbTables } from '../test/otlp-requests.ts';

let tables: ChdbTables;
beforeAll(async () => {
  tables = await ChdbTables.open();
});
afterAll(() => tables?.close());
beforeEach(() => tables.select('TRUNCATE TABLE otel.ingest_counts'));

/** 2026-08-03 10:00:07 UTC: inside the bucket of 10:00:00. */
const NOW = Date.UTC(2026, 7, 3, 10, 0, 7);

/** A bus that stores what it takes in chDB, refusing while `down`. */
function tallyWith(options: { maxPendingRows?: number } = {}) {
  const bus = {
    down: false,
    published: [] as TableChunk[][],
    async publish(chunks: readonly TableChunk[]) {
      if (bus.down) throw new SluiceError('unavailable', 'the bus is full');
      bus.published.push([...chunks]);
      tables.insert({ tables: chunks as never, accepted: 0, rejected: 0 });
    },
  };
  const clock = { now: NOW };
  const dropped: number[] = [];
  const { log, entries } = capturedLog();
  const tally = new IngestTally({ bus, log, now: () => clock.now, onDropped: (rows) => dropped.push(rows), ...options });
  return { tally, bus, clock, dropped, entries };
}

const stored = () => tables.select(
  'SELECT SourceId, toString(Timestamp) AS Timestamp, Signal, Outcome, Reason, sum(Requests) AS Requests, sum(Items) AS Items ' +
    'FROM otel.ingest_counts GROUP BY ALL ORDER BY Timestamp, SourceId, Signal, Outcome, Reason',
).map((r) => ({ ...r, Requests: Number(r.Requests), Items: Number(r.Items) }) as ReturnType<typeof row>);

const row = (SourceId: string, Timestamp: string, Signal: string, Outcome: string, Reason: string, Requests: number, Items: number) =>
  ({ SourceId, Timestamp, Signal, Outcome, Reason, Requests, Items });

describe('IngestTally', () => {
  it('counts requests and items per source, signal, outcome and reason, as rows of the bucket they fell in', async () => {
    const { tally, bus } = tallyWith();
    tally.accepted('src_a', 'traces', 100);
    tally.accepted('src_a', 'traces', 50, 3); // 3 spans refused one by one (partial_success)
    tally.accepted('src_a', 'deploys', 1);
    tally.accepted('src_b', 'agent_logs', 1000);
    // Refused after decoding: the items are known.
    tally.refused('src_a', 'traces', new RefusedAfterDecoding(40, new SluiceError('unavailable', 'the bus is full')));
    // Refused before decoding: one item each.
    tally.refused('src_a', 'traces', new SluiceError('payload_too_large', 'too large'));
    tally.refused('src_a', 'traces', new SluiceError('payload_too_large', 'too large'));
    tally.refused('src_b', 'heartbeats', new TypeError('a bug'));
    tally.refused('', 'logs', new SluiceError('unauthorized', 'no key'));
    tally.refusedFor('', 'metrics', 'rate_limited');
    await tally.flush();

    expect(bus.published).toHaveLength(1);
    const at = '2026-08-03 10:00:00';
    expect(stored()).toEqual([
      row('', at, 'logs', 'refused', 'unauthorized', 1, 1),
      row('', at, 'metrics', 'refused', 'rate_limited', 1, 1),
      row('src_a', at, 'deploys', 'accepted', '', 1, 1),
      row('src_a', at, 'traces', 'accepted', '', 2, 150),
      row('src_a', at, 'traces', 'refused', 'bad_request', 0, 3),
      row('src_a', at, 'traces', 'refused', 'payload_too_large', 2, 2),
      row('src_a', at, 'traces', 'refused', 'unavailable', 1, 40),
      row('src_b', at, 'agent_logs', 'accepted', '', 1, 1000),
      row('src_b', at, 'heartbeats', 'refused', 'internal', 1, 1),
    ]);
  });

  it('starts each bucket from zero, and publishes nothing for a bucket without requests', async () => {
    const { tally, bus, clock } = tallyWith();
    tally.accepted('src_a', 'logs', 7);
    clock.now = NOW + 5_000; // the flush at the boundary of 10:00:10
    await tally.flush();
    await tally.flush();
    expect(bus.published).toHaveLength(1);
    tally.accepted('src_a', 'logs', 2);
    clock.now = NOW + 15_000;
    await tally.flush();
    expect(stored()).toEqual([
      row('src_a', '2026-08-03 10:00:00', 'logs', 'accepted', '', 1, 7),
      row('src_a', '2026-08-03 10:00:10', 'logs', 'accepted', '', 1, 2),
    ]);
  });

  it('keeps a flush the bus refused, logs it, and sends it with the next one under its own bucket', async () => {
    const { tally, bus, clock, entries, dropped } = tallyWith();
    tally.accepted('src_a', 'metrics', 10);
    bus.down = true;
    clock.now = NOW + 5_000;
    await tally.flush();
    expect(tally.pendingRowCount).toBe(1);
    expect(entries().find((e) => e.msg === 'ingest counts not written: kept for the next flush')).toMatchObject({ level: 40, rows: 1, err: 'the bus is full' });

    bus.down = false;
    tally.accepted('src_a', 'metrics', 20);
    clock.now = NOW + 15_000;
    await tally.flush();
    expect(tally.pendingRowCount).toBe(0);
    expect(bus.published).toHaveLength(1);
    expect(stored()).toEqual([
      row('src_a', '2026-08-03 10:00:00', 'metrics', 'accepted', '', 1, 10),
      row('src_a', '2026-08-03 10:00:10', 'metrics', 'accepted', '', 1, 20),
    ]);
    expect(dropped).toEqual([]);
  });

  it('keeps at most maxPendingRows while the bus refuses: the oldest rows go, counted and logged', async () => {
    const { tally, bus, clock, entries, dropped } = tallyWith({ maxPendingRows: 5 });
    bus.down = true;
    // Eight buckets of two rows each (two sources).
    for (let bucket = 0; bucket < 8; bucket++) {
      tally.accepted('src_a', 'traces', bucket + 1);
      tally.accepted('src_b', 'traces', bucket + 1);
      clock.now = NOW + 3_000 + bucket * 10_000;
      await tally.flush();
      expect(tally.pendingRowCount).toBeLessThanOrEqual(5);
    }
    expect(tally.pendingRowCount).toBe(4);
    expect(dropped.reduce((a, b) => a + b, 0)).toBe(12);
    expect(entries().filter((e) => e.msg === 'ingest counts dropped: the bus refused them for too long')[0]).toMatchObject({ level: 50, maxPendingRows: 5 });

    bus.down = false;
    await tally.flush();
    // The newest two buckets are what is left.
    expect(stored().map((r) => [r.Timestamp, r.SourceId, r.Items])).toEqual([
      ['2026-08-03 10:01:00', 'src_a', 7], ['2026-08-03 10:01:00', 'src_b', 7],
      ['2026-08-03 10:01:10', 'src_a', 8], ['2026-08-03 10:01:10', 'src_b', 8],
    ]);
  });

  it('drops what the bus still refuses at shutdown, counted and logged', async () => {
    const { tally, bus, entries, dropped } = tallyWith();
    bus.down = true;
    tally.accepted('src_a', 'traces', 1);
    tally.accepted('src_b', 'traces', 1);
    await tally.shutdown();
    expect(dropped).toEqual([2]);
    expect(tally.pendingRowCount).toBe(0);
    expect(entries().find((e) => e.msg === 'ingest counts lost at shutdown: the bus did not take them')).toMatchObject({ level: 50, rows: 2 });
  });

  it('cuts many rows into chunks that fit a cluster\'s bus messages', async () => {
    const { tally, bus } = tallyWith();
    for (let i = 0; i < 20_000; i++) tally.accepted(`src_${String(i).padStart(6, '0')}`, 'traces', i);
    await tally.flush();
    const chunks = bus.published[0]!;
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks) expect(chunk.data.byteLength).toBeLessThan(257 * 1024);
    expect(chunks.reduce((rows, chunk) => rows + chunk.rows, 0)).toBe(20_000);
    expect(tables.select('SELECT toUInt32(count()) AS n, toUInt32(sum(Items)) AS items FROM otel.ingest_counts')).toEqual([{ n: 20_000, items: 19_999 * 20_000 / 2 }]);
  });

  it('adds up the rows of several gateways for one bucket (SummingMergeTree)', async () => {
    const gateways = [tallyWith(), tallyWith()];
    for (const { tally } of gateways) {
      tally.accepted('src_a', 'logs', 5);
      tally.refused('src_a', 'logs', new SluiceError('bad_request', 'garbage'));
      await tally.flush();
    }
    tables.select('OPTIMIZE TABLE otel.ingest_counts FINAL');
    expect(tables.select('SELECT Outcome, Reason, Requests, Items FROM otel.ingest_counts ORDER BY Outcome').map((r) => ({ ...r, Requests: Number(r.Requests), Items: Number(r.Items) })))
      .toEqual([{ Outcome: 'accepted', Reason: '', Requests: 2, Items: 10 }, { Outcome: 'refused', Reason: 'bad_request', Requests: 2, Items: 2 }]);
  });

  it('flushes at every bucket boundary while it runs, then the rest at shutdown', async () => {
    const published: TableChunk[][] = [];
    const tally = new IngestTally({ bus: { publish: async (chunks) => void published.push([...chunks]) }, log: capturedLog().log, flushIntervalMs: 100 });
    const supervisor = new AbortController();
    const loop = tally.run({ signal: supervisor.signal, report: () => {} });
    tally.accepted('src_a', 'traces', 1);
    const deadline = Date.now() + 5_000;
    while (published.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(published).toHaveLength(1);
    tally.accepted('src_a', 'traces', 1);
    await tally.shutdown();
    expect(published).toHaveLength(2);
    // Shut down, the loop waits for the supervisor's stop rather than end by itself (which would restart it).
    let ended = false;
    void loop.then(() => (ended = true));
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect([ended, published.length]).toEqual([false, 2]);
    supervisor.abort();
    await loop;
  });
});
