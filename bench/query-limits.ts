/**
 * What the query endpoint (SLUICE_QUERY_PORT) costs `sluice serve` under a hostile Grafana
 * user. A Sluice target of its own gets, one after the other:
 *
 * - the two statements of the memory finding (a 150M-element groupArray; arrayMap over
 *   range(300000000)): for each, the answer (status, ClickHouse code), how long it took, and
 *   the server's resident set before and at its highest meanwhile (VmRSS sampled every 20 ms);
 * - two results of about 90 MiB at once (Native at clickhouse-go's revision, as Grafana asks)
 *   while the ingest port's /api/v1/health is asked again and again, one request after the
 *   other: the slowest health answer, the median, and how many there were; and the server's
 *   own event-loop delay meanwhile (max and p99 of `perf_hooks.monitorEventLoopDelay`, from
 *   /metrics, reset by each scrape). The bench reads the big answers as they stream, without
 *   keeping them, so its own event loop does not delay the health requests it times.
 *
 * usage: node --import tsx bench/query-limits.ts [--repeat 3] [--results-only]
 */
import { parseArgs } from 'node:util';
import { freePort } from '../test/free-port.ts';
import { rssMiB, startTarget } from './target.ts';

const { values } = parseArgs({ options: { repeat: { type: 'string', default: '3' }, 'results-only': { type: 'boolean', default: false } } });
const repeat = Number(values.repeat);
const PASSWORD = 'a long bench query password';
const MEMORY_STATEMENTS = [
  'SELECT length(groupArray(number)) FROM numbers(150000000)',
  'SELECT sum(arraySum(arrayMap(x -> sipHash64(x,x,x,x), range(300000000))))',
];
/** About 90 MiB of Native: 90,000 rows of a 1 KiB string (within the default 100 MiB result limit). */
const BIG_RESULT = "SELECT number, repeat('x', 1024) AS s FROM numbers(90000)";

const queryPort = await freePort();
const target = await startTarget('sluice', { SLUICE_QUERY_PORT: String(queryPort), SLUICE_QUERY_PASSWORD: PASSWORD });
const authorization = `Basic ${Buffer.from(`grafana:${PASSWORD}`).toString('base64')}`;
const query = async (sql: string, params: Record<string, string> = {}) => {
  const response = await fetch(`http://127.0.0.1:${queryPort}/?${new URLSearchParams({ database: 'otel', ...params })}`, { method: 'POST', headers: { authorization }, body: sql });
  let bytes = 0;
  for await (const chunk of response.body!) bytes += chunk.byteLength;
  return { status: response.status, code: response.headers.get('x-clickhouse-exception-code') ?? '-', bytes };
};
/** The server's event-loop delay in ms (p99, max) since the last scrape. */
const loopDelay = async () => {
  const metrics = await (await fetch(`${target.url}/metrics`)).text();
  const ms = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1]) * 1000;
  return { p99: ms('nodejs_eventloop_lag_p99_seconds'), max: ms('nodejs_eventloop_lag_max_seconds') };
};

try {
  console.log('| statement | answer | seconds | RSS before (MiB) | RSS peak (MiB) |');
  console.log('|---|---|---|---|---|');
  for (const sql of values['results-only'] ? [] : MEMORY_STATEMENTS) {
    for (let i = 0; i < repeat; i++) {
      const before = rssMiB(target.pid);
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(target.pid))), 20);
      const started = performance.now();
      const answer = await query(sql);
      const seconds = (performance.now() - started) / 1000;
      clearInterval(sampler);
      console.log(`| \`${sql}\` | ${answer.status}, code ${answer.code} | ${seconds.toFixed(1)} | ${before.toFixed(0)} | ${peak.toFixed(0)} |`);
    }
  }

  console.log('\n| two ~90 MiB Native results at once | health answers | median (ms) | slowest (ms) | server loop delay p99 (ms) | max (ms) |');
  console.log('|---|---|---|---|---|---|');
  for (let i = 0; i < repeat; i++) {
    await loopDelay();
    let busy = true;
    const latencies: number[] = [];
    const poll = (async () => {
      while (busy) {
        const started = performance.now();
        await (await fetch(`${target.url}/api/v1/health`)).arrayBuffer();
        latencies.push(performance.now() - started);
      }
    })();
    const answers = await Promise.all([1, 2].map(() => query(BIG_RESULT, { default_format: 'Native', client_protocol_version: '54460' })));
    busy = false;
    await poll;
    latencies.sort((a, b) => a - b);
    const sizes = answers.map((answer) => `${answer.status} ${(answer.bytes / 2 ** 20).toFixed(1)} MiB`).join(', ');
    const delay = await loopDelay();
    console.log(`| ${sizes} | ${latencies.length} | ${latencies[latencies.length >> 1]!.toFixed(1)} | ${latencies.at(-1)!.toFixed(1)} | ${delay.p99.toFixed(0)} | ${delay.max.toFixed(0)} |`);
  }
} finally {
  await target.stop();
}
