/**
 * Scenario relay-webhooks: submissions to delivered webhooks, end to end, on the embedded
 * default; the webhooks go to a receiver in the runner process (bench/webhook-receiver.ts).
 */
import { load, type Options, type Row, type WebhookFigures } from './measure.ts';
import { quantile } from './open-loop.ts';
import type { Scenario } from './scenarios.ts';
import { cpuSeconds, machineBusySeconds, startTarget, type EmbeddedTarget, type RunningTarget } from './target.ts';
import { startBenchWebhookReceiver } from './webhook-receiver.ts';


/** The latest state of every delivery job, as the server's history has it (queued = no attempt yet). */
async function jobStates(target: RunningTarget): Promise<unknown> {
  return target.cli('query', `SELECT (SELECT count() FROM otel.relay_delivery_jobs) AS jobs, countIf(s = 'sending') AS sending,
    countIf(s = 'delivered') AS delivered, countIf(s = 'failed') AS failed, countIf(s = 'dead') AS dead
    FROM (SELECT argMax(State, (Series, Attempt, At)) AS s FROM otel.relay_delivery_attempts GROUP BY JobId)`);
}

/**
 * relay-webhooks: the load of relay-submissions, then the wait for every accepted submission's
 * webhook. The warm-up's webhooks are awaited before the measured run starts, so its window —
 * from the load's start to the last webhook — holds its own deliveries only; the server's CPU is
 * read at both ends of that window.
 */
export async function measureWebhooks(name: EmbeddedTarget, scenarioOf: Scenario, opts: Options): Promise<Row> {
  const log = (msg: string) => process.stderr.write(`[${name}] ${msg}\n`);
  const receiver = await startBenchWebhookReceiver();
  const target = await startTarget(name, scenarioOf.env);
  try {
    const scenario = { ...scenarioOf, bodies: (await scenarioOf.prepare!(target, receiver)).bodies };
    const timeoutMs = opts.deliveryTimeout * 1000;
    log(`pid ${target.pid} at ${target.relayUrl}, webhooks to ${receiver.url}; warm-up ${opts.warmup} s, then ${opts.duration} s × ${opts.connections} connections`);
    const warmIds: string[] = [];
    const warm = opts.warmup > 0 ? await load({ url: target.relayUrl, headers: target.headers }, scenario, opts.warmup, opts.connections, warmIds) : undefined;
    const warmMissing = await receiver.waitFor(warmIds, timeoutMs);
    if (warmMissing.length) throw new Error(`${warmMissing.length} of the warm-up's ${warmIds.length} webhooks missing after ${opts.deliveryTimeout} s: ${JSON.stringify(await jobStates(target))}`);
    const deliveredBefore = receiver.delivered.size;

    const ids: string[] = [];
    const cpu0 = cpuSeconds(target.pid);
    const ours0 = process.cpuUsage();
    const machine0 = machineBusySeconds();
    const start = Date.now();
    const result = await load({ url: target.relayUrl, headers: target.headers }, scenario, opts.duration, opts.connections, ids);
    const loadEnd = Date.now();
    const missing = await receiver.waitFor(ids, timeoutMs);
    const cpu = cpuSeconds(target.pid) - cpu0;
    const ours = process.cpuUsage(ours0);
    const machine = machineBusySeconds() - machine0;
    const loadgen = (ours.user + ours.system) / 1e6;
    // Complete: the window ends with the last webhook (CPU was read within one 50 ms poll of it).
    const window = ((missing.length ? Date.now() : receiver.lastAt) - start) / 1000;
    const [deliveredAll, lastAt] = [receiver.delivered.size, receiver.lastAt];

    const delivered = deliveredAll - deliveredBefore;
    const latencies = ids.flatMap((id) => receiver.delivered.get(id) ?? []).sort((a, b) => a - b);
    const acknowledged = warmIds.length + ids.length;
    const unacknowledged = deliveredAll - (acknowledged - missing.length);
    // A request cut off when a load ends (one per connection) may be stored and delivered without an answer.
    const unanswered = [warm, result].reduce((sum, r) => sum + (r ? r.requests.sent - r.requests.total : 0), 0);
    const verified = missing.length === 0 && unacknowledged <= unanswered && receiver.badSignatures === 0;
    log(`${ids.length} submissions accepted, ${delivered} webhooks received, last one ${((lastAt - loadEnd) / 1000).toFixed(1)} s after the load; ` +
      `${receiver.checked} signatures checked, ${receiver.badSignatures} bad; ${receiver.repeats} repeated webhook-ids; ${unacknowledged} for the ${unanswered} requests cut off unanswered: ${verified ? 'ok' : 'MISMATCH'}`);
    if (missing.length) log(`${missing.length} webhooks missing after ${opts.deliveryTimeout} s, e.g. submissions ${missing.slice(0, 5).join(', ')}; the server's jobs: ${JSON.stringify(await jobStates(target))}`);
    return {
      target: name,
      reqPerSec: result.requests.total / result.duration,
      itemsPerSec: delivered / window,
      p50Ms: result.latency.p50,
      p99Ms: result.latency.p99,
      errors: result.non2xx + result.errors,
      statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count])),
      cpuSecondsPerItems: delivered ? cpu / (delivered / 1000) : NaN,
      serverCores: cpu / window,
      loadgenCores: loadgen / window,
      otherCores: Math.max(0, machine - cpu - loadgen) / window,
      acknowledgedItems: acknowledged,
      storedItems: deliveredAll,
      verified,
      webhooks: {
        acceptedPerSec: ids.length / result.duration,
        deliveredPerSec: delivered / window,
        tailSeconds: (lastAt - loadEnd) / 1000,
        p50Ms: quantile(latencies, 0.5),
        p99Ms: quantile(latencies, 0.99),
        missing: missing.length,
        missingIds: missing.slice(0, 20),
        unacknowledged,
        repeats: receiver.repeats,
        signaturesChecked: receiver.checked,
        badSignatures: receiver.badSignatures,
      },
    };
  } finally {
    await target.stop();
    await receiver.close();
  }
}
