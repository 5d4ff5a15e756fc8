/**
 * Micro-benchmark of agent log batches in a pipeline thread (one thread, CPU time): 1,000-entry
 * JSON batches, gzipped (bench/payload.ts agentLogBodies), in entries per second, stage by
 * stage and the worker's whole task (decompress + parse + validate + rows). Medians of
 * several rounds; then what one batch costs in fresh buffers, JS heap and GC.
 *
 *   npx tsx bench/agent-transcode.ts [rounds=7] [secondsPerRound=1.5]
 */
import { gunzipSync } from 'node:zlib';
import { agentLogBodies } from './payload.ts';
import { nestedDeeperThan } from '../core/json-depth.ts';
import { allocations, benchOptions, measure, workerTaskStep } from '../pipeline/bench-rounds.ts';
import type { AgentTask } from '../pipeline/tasks.ts';
import { transcodeAgent } from '../pipeline/agent/rows.ts';
import { validateAgentPayload } from '../pipeline/agent/schemas.ts';

const options = benchOptions();
const ENTRIES = 1000;
const RECEIVED = 1_795_000_000_000_000_000n;

const { bodies, rawBytes, gzipBytes } = agentLogBodies(64, ENTRIES);
const raw = bodies.map((body) => gunzipSync(body));
const texts = raw.map((body) => body.toString());
const task = (i: number): AgentTask => ({
  kind: 'agent', payload: 'logs', encoding: 'gzip', body: bodies[i % bodies.length]!,
  sourceId: 'bench', maxBytes: 10 * 1024 * 1024, maxChunkBytes: Infinity, receivedAt: String(RECEIVED),
});
const workerTask = workerTaskStep(task);
const decoder = new TextDecoder('utf-8', { fatal: true });

console.log(`${bodies.length} distinct batches of ${ENTRIES} entries: ${Math.round(rawBytes)} B JSON, ${Math.round(gzipBytes)} B gzip`);
await measure('gunzip only', 'entries', (i) => (gunzipSync(bodies[i % bodies.length]!), ENTRIES), options);
await measure('UTF-8 decode only', 'entries', (i) => (decoder.decode(raw[i % raw.length]!), ENTRIES), options);
await measure('depth scan only', 'entries', (i) => (nestedDeeperThan(texts[i % texts.length]!, 32), ENTRIES), options);
await measure('JSON.parse only', 'entries', (i) => (JSON.parse(texts[i % texts.length]!), ENTRIES), options);
await measure('parse + validate', 'entries', (i) => (validateAgentPayload('logs', JSON.parse(texts[i % texts.length]!)), ENTRIES), options);
await measure('rows (decode..rows)', 'entries', (i) => transcodeAgent('logs', raw[i % raw.length]!, 'bench', Infinity, RECEIVED).accepted, options);
await measure('worker task', 'entries', (i) => workerTask(i), options);
console.log('per batch:');
await allocations('worker task', (i) => workerTask(i), 300);
await allocations('worker task, rows recycled', (i) => workerTask(i, true), 300);
