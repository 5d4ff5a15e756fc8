/**
 * Memory stays bounded when storage stalls on the embedded default: the chDB insert of a
 * `sluice serve` hangs for 20 s (its insert is held in the test) while 16 clients keep posting
 * ~1 MiB OTLP requests. The byte budget (32 MiB) holds every request's bytes from admission
 * until its rows are in the local log, and the log (64 MiB here) refuses once full, so:
 *   - the budget in use never passes its limit, and the process's RSS stays under its RSS when
 *     the stall began + the budget + the batch the log's applier read back and holds while its
 *     insert hangs (at most the log's 64 MiB here) + a margin;
 *   - every request is answered, with 200 or with 503 + Retry-After;
 *   - once storage answers again, exactly the requests answered 200 are stored.
 * (The cluster variant, a frozen nats-server for 60 s, is test/memory-budget.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

const MiB = 1024 * 1024;
const BUDGET = 32 * MiB;
/** The local log's limit: the batch its applier reads back (and holds during the stall) is at most this. */
const LOG = 64 * MiB;
const STALL_MS = 20_000;
const CLIENTS = 16;
const SPANS = 12_000;
/** Dead buffers V8 has not collected yet may still count in RSS (see test/memory-budget.test.ts). */
const MARGIN = 64 * MiB;

let sluice: TestSluice;
/** While set, every insert waits for it. */
let stall: Promise<void> | undefined;

beforeAll(async () => {
  sluice = await startTestSluice({
    'limits.maxInFlightBytes': BUDGET,
    'limits.rateBurst': 100_000,
    'limits.ratePerMinute': 6_000_000,
    'storage.retryAfterSeconds': 1,
    'storage.maxPendingBytes': LOG,
  });
  // The storage driver's insert, held while the test stalls it (the sink calls it at each batch).
  const insert = sluice.storage.insert.bind(sluice.storage);
  sluice.storage.insert = async (batch) => {
    await stall;
    return insert(batch);
  };
});
afterAll(async () => sluice?.stop());

const rss = () => process.memoryUsage().rss;
const inUse = async () => (await sluice.readiness.report()).components.inflight!.figures!.inUseBytes!;

describe('storage stalled under load (embedded)', () => {
  it('keeps memory under the budget, answers 200 or 503 + Retry-After, and stores exactly what it acknowledged', async () => {
    const template = Buffer.from(encodeTraces(traceRequest({ spans: SPANS, service: 'stall-000000' })));
    const at = template.indexOf('stall-000000');
    const answers: Array<{ service: string; status: number | string; retryAfter: string | null }> = [];
    let running = true;
    let next = 0;
    const client = async () => {
      while (running) {
        const service = `stall-${String(next++).padStart(6, '0')}`;
        const body = Buffer.from(template);
        body.write(service, at, 'latin1');
        try {
          const response = await fetch(`${sluice.baseUrl}/v1/traces`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-protobuf', 'x-api-key': sluice.apiKey },
            body,
            signal: AbortSignal.timeout(STALL_MS + 60_000),
          });
          await response.arrayBuffer();
          answers.push({ service, status: response.status, retryAfter: response.headers.get('retry-after') });
          if (response.status !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
        } catch (err) {
          answers.push({ service, status: `failed: ${(err as Error).message}`, retryAfter: null });
        }
      }
    };
    const clients = Array.from({ length: CLIENTS }, client);
    await eventually(() => answers.filter((a) => a.status === 200).length >= 10, 60_000, 100);

    let resume!: () => void;
    stall = new Promise((resolve) => (resume = resolve));
    const rssAtStall = rss();
    let rssPeak = rssAtStall;
    let inUsePeak = 0;
    const stallEnds = Date.now() + STALL_MS;
    while (Date.now() < stallEnds) {
      rssPeak = Math.max(rssPeak, rss());
      inUsePeak = Math.max(inUsePeak, await inUse());
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    stall = undefined;
    resume();
    const before = answers.filter((a) => a.status === 200).length;
    await eventually(() => answers.filter((a) => a.status === 200).length >= before + 5, 60_000, 100);
    running = false;
    await Promise.all(clients);
    console.log(
      `embedded-stall figures: budget ${BUDGET / MiB} MiB, in use at most ${(inUsePeak / MiB).toFixed(1)} MiB; ` +
        `RSS at stall ${(rssAtStall / MiB).toFixed(1)} MiB, peak +${((rssPeak - rssAtStall) / MiB).toFixed(1)} MiB; ` +
        `answers 200: ${answers.filter((a) => a.status === 200).length}, 503: ${answers.filter((a) => a.status === 503).length}`,
    );

    expect(inUsePeak).toBeLessThanOrEqual(BUDGET);
    expect(rssPeak).toBeLessThan(rssAtStall + BUDGET + LOG + MARGIN);
    expect(answers.filter((a) => a.status !== 200 && a.status !== 503)).toEqual([]);
    const refused = answers.filter((a) => a.status === 503);
    expect(refused.length).toBeGreaterThan(10);
    for (const answer of refused) expect(answer.retryAfter, answer.service).toBe('1');

    const acknowledged = answers.filter((a) => a.status === 200).map((a) => a.service).sort();
    const storedCount = async () => Number((await sluice.rows<{ n: string }>("SELECT uniqExact(ServiceName) AS n FROM otel.otel_traces WHERE ServiceName LIKE 'stall-%'"))[0]!.n);
    await eventually(async () => (await storedCount()) >= acknowledged.length, 60_000, 500);
    const stored = (await sluice.rows<{ service: string; n: string }>(
      "SELECT ServiceName AS service, count() AS n FROM otel.otel_traces WHERE ServiceName LIKE 'stall-%' GROUP BY service ORDER BY service",
    ));
    expect(stored.map((row) => row.service)).toEqual(acknowledged);
    for (const row of stored) expect(Number(row.n), row.service).toBe(SPANS);
    expect(await inUse()).toBe(0);
  });
});
