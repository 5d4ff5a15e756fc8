/**
 * Can a caller tell the four 404s of POST /api/v1/submissions apart by their timing? Sends the
 * five refused cases (unknown site, unknown form, inactive site, inactive form, Origin not
 * allowed) interleaved in a random order per round, one at a time over one keep-alive
 * connection, to a `sluice serve` of its own, and prints each case's latency quantiles.
 *
 * usage: node --import tsx bench/relay-404-timing.ts [--rounds 2000]
 */
import { Agent, request } from 'node:http';
import { parseArgs } from 'node:util';
import { startTarget } from './target.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '2000' } } });
const rounds = Number(values.rounds);
const ORIGIN = 'https://www.timing.example';

const target = await startTarget('sluice');
try {
  const cli = (...args: string[]) => target.cli('relay', ...args) as Promise<any>;
  const { tenant } = await cli('onboard', '--tenant', 'Timing', '--owner', 'owner@timing.example');
  const site = async (active: boolean, formActive: boolean) => {
    const created = await cli('sites', 'create', '--tenant', tenant.id, '--name', 'T', '--origin', ORIGIN);
    await cli('forms', 'create', '--site', created.id, '--name', 'Contact', '--key', 'contact', '--active', String(formActive));
    if (!active) await cli('sites', 'update', '--site', created.id, '--active', 'false');
    return created.siteKey as string;
  };
  const [good, inactiveSite, inactiveForm] = [await site(true, true), await site(false, true), await site(true, false)];
  const body = (siteKey: string, formKey = 'contact') => JSON.stringify({ siteKey, formKey, data: { name: 'Ann', message: 'Hello' } });
  const cases: Record<string, { body: string; origin: string }> = {
    'unknown site': { body: body('sk_AAAAAAAAAAAAAAAAAAAAAA'), origin: ORIGIN },
    'unknown form': { body: body(good, 'nope'), origin: ORIGIN },
    'inactive site': { body: body(inactiveSite), origin: ORIGIN },
    'inactive form': { body: body(inactiveForm), origin: ORIGIN },
    'origin not allowed': { body: body(good), origin: 'https://evil.example' },
  };
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const url = new URL(`${target.relayUrl}/api/v1/submissions`);
  /** One POST; resolves to its status once the whole answer is read. */
  const post = (payload: string, origin: string) =>
    new Promise<number>((resolve, reject) => {
      const outgoing = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', origin, 'content-length': Buffer.byteLength(payload) } }, (incoming) => {
        incoming.on('data', () => {}).on('end', () => resolve(incoming.statusCode!)).on('error', reject);
      });
      outgoing.on('error', reject).end(payload);
    });
  const samples = new Map(Object.keys(cases).map((name) => [name, [] as number[]]));
  const send = async (name: string) => {
    const { body: payload, origin } = cases[name]!;
    const started = process.hrtime.bigint();
    const status = await post(payload, origin);
    const micros = Number(process.hrtime.bigint() - started) / 1000;
    if (status !== 404) throw new Error(`${name}: expected 404, got ${status}`);
    return micros;
  };
  const names = Object.keys(cases);
  for (let i = 0; i < 200; i++) await send(names[i % names.length]!); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (const name of [...names].sort(() => Math.random() - 0.5)) samples.get(name)!.push(await send(name));
  }
  const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  const medians: number[] = [];
  console.log(`\n${rounds} rounds, one request of each case per round in random order, one connection, µs:\n`);
  console.log('| case | p10 | median | p90 |\n|---|---:|---:|---:|');
  for (const [name, values] of samples) {
    const sorted = values.sort((a, b) => a - b);
    medians.push(quantile(sorted, 0.5));
    console.log(`| ${name} | ${quantile(sorted, 0.1).toFixed(0)} | ${quantile(sorted, 0.5).toFixed(0)} | ${quantile(sorted, 0.9).toFixed(0)} |`);
  }
  console.log(`\nspread of the medians: ${(Math.max(...medians) - Math.min(...medians)).toFixed(1)} µs`);
  agent.destroy();
} finally {
  await target.stop();
}
