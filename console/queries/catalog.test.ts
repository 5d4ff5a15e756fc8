import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALE_AFTER_MS } from './config.ts';
import { ConsoleQueries } from './queries.ts';
import {
  hexId, ingestAgent, ingestOtlp, logsRequest, metricsRequest, ms, openQueries, pointTimes, tracesRequest, type QueriesFixture,
} from '../../test/console-queries-fixture.ts';

let fixture: QueriesFixture;
let queries: ConsoleQueries;
const now = Date.now();
const range = { from: now - 3_600_000, to: now };
const nanos = (at: number) => String(ms(at));

beforeAll(async () => {
  fixture = await openQueries();
  ({ queries } = fixture);
  const { storage } = fixture.engine;
  const minutesAgo = (n: number) => now - n * 60_000;
  for (const source of ['src-a', 'src-b']) {
    const own = (name: string) => `${name}-${source}`;
    await ingestOtlp(storage, 'traces', tracesRequest(own('traced'), [{ traceId: hexId(16), spanId: hexId(8), name: 'op', start: ms(minutesAgo(5)), durationNs: 1000n }]), source);
    await ingestOtlp(storage, 'traces', tracesRequest(own('long-ago'), [{ traceId: hexId(16), spanId: hexId(8), name: 'op', start: ms(minutesAgo(300)), durationNs: 1000n }]), source);
    await ingestOtlp(storage, 'logs', logsRequest(own('logged'), [{ time: ms(minutesAgo(5)), body: 'x' }]), source);
    await ingestOtlp(storage, 'metrics', metricsRequest(own('measured'), [{ name: 'm', gauge: { dataPoints: [{ ...pointTimes(Math.floor(minutesAgo(5) / 1000)), asDouble: 1 }] } }]), source);
    await ingestAgent(storage, 'logs', { service: own('agent-logged'), entries: [{ message: 'x' }] }, source, minutesAgo(5));
    await ingestAgent(storage, 'metrics', { service: own('agent-measured'), metrics: [{ name: 'm', value: 1 }] }, source, minutesAgo(5));
    // A log without a service is nobody's service.
    await ingestAgent(storage, 'logs', { entries: [{ message: 'no service' }] }, source, minutesAgo(5));
    await ingestAgent(storage, 'deploy', { service: 'checkout', version: `1.0-${source}`, environment: 'prod', commit: 'abc', deployedBy: 'ci', description: 'first', url: 'https://ci/1', timestamp: nanos(minutesAgo(50)) }, source, now);
    await ingestAgent(storage, 'deploy', { service: own('deployed'), version: '2.0', timestamp: nanos(minutesAgo(20)) }, source, now);
    await ingestAgent(storage, 'deploy', { service: 'checkout', version: '0.9', timestamp: nanos(minutesAgo(200)) }, source, now);
    // Agents: one seen a minute ago (after an older heartbeat), one last seen 6 minutes ago.
    await ingestAgent(storage, 'heartbeat', { agentId: 'a1', version: '1.0', host: 'h-old', status: 'starting' }, source, minutesAgo(30));
    await ingestAgent(storage, 'heartbeat', { agentId: 'a1', version: '1.1', host: 'h1', os: 'linux', arch: 'amd64', status: 'ok' }, source, minutesAgo(1));
    await ingestAgent(storage, 'heartbeat', { agentId: 'a2', version: '1.0', host: 'h2' }, source, now - STALE_AFTER_MS - 60_000);
  }
});
afterAll(() => fixture?.close());

describe('services', () => {
  it('are every service that sent spans, logs, metrics or agent data, or was deployed, in the range; sorted', async () => {
    expect(await queries.services(['src-a'], range)).toEqual(
      ['agent-logged', 'agent-measured', 'deployed', 'logged', 'measured', 'traced'].map((s) => `${s}-src-a`).concat('checkout').sort(),
    );
    expect(await queries.services(['src-a'], { from: now - 400 * 60_000, to: now - 250 * 60_000 })).toEqual(['long-ago-src-a']);
    expect((await queries.services(['src-a', 'src-b'], range)).filter((s) => s.startsWith('traced'))).toEqual(['traced-src-a', 'traced-src-b']);
    expect(await queries.services(['src-c'], range)).toEqual([]);
    const refusing = new ConsoleQueries({ run: () => Promise.reject(new Error('a statement ran')) }, 'otel');
    expect(await refusing.services([], range)).toEqual([]);
  });
});

describe('deploys', () => {
  it("are the range's deploy markers of the tenant, newest first, every field", async () => {
    expect(await queries.deploys(['src-a'], range)).toEqual([
      { time: now - 20 * 60_000, sourceId: 'src-a', service: 'deployed-src-a', version: '2.0', environment: '', commit: '', deployedBy: '', description: '', url: '' },
      { time: now - 50 * 60_000, sourceId: 'src-a', service: 'checkout', version: '1.0-src-a', environment: 'prod', commit: 'abc', deployedBy: 'ci', description: 'first', url: 'https://ci/1' },
    ]);
    expect((await queries.deploys(['src-a'], { ...range, services: ['checkout'] })).map((d) => d.version)).toEqual(['1.0-src-a']);
    expect((await queries.deploys(['src-b', 'src-a'], { ...range, services: ['checkout'] })).map((d) => d.version).sort()).toEqual(['1.0-src-a', '1.0-src-b']);
    expect(await queries.deploys(['src-c'], range)).toEqual([]);
    expect(await queries.deploys([], range)).toEqual([]);
  });
});

describe('agents', () => {
  it("are each agent's latest heartbeat, most recently seen first; stale after 5 minutes without one", async () => {
    const agents = await queries.agents(['src-a']);
    expect(agents).toEqual([
      { sourceId: 'src-a', agentId: 'a1', host: 'h1', version: '1.1', os: 'linux', arch: 'amd64', status: 'ok', lastSeen: now - 60_000, stale: false },
      { sourceId: 'src-a', agentId: 'a2', host: 'h2', version: '1.0', os: '', arch: '', status: '', lastSeen: now - STALE_AFTER_MS - 60_000, stale: true },
    ]);
    expect((await queries.agents(['src-a', 'src-b'])).map((a) => `${a.sourceId}/${a.agentId}`).sort()).toEqual(['src-a/a1', 'src-a/a2', 'src-b/a1', 'src-b/a2']);
    expect(await queries.agents(['src-c'])).toEqual([]);
    expect(await queries.agents([])).toEqual([]);
  });
});
