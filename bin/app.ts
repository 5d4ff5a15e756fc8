/**
 * The roles: each takes the parts it needs from the component graph (graph.ts), starts the
 * servers it owns, and returns a handle whose shutdown() stops everything in reverse order,
 * draining in-flight work.
 *
 *   serve    every role in one process (the embedded default, or one node of a cluster)
 *   gateway  HTTP/gRPC front end and worker pool; rows go to JetStream (needs NATS_URL)
 *   consume  storage consumer: JetStream → storage (needs NATS_URL)
 *   deliver  relay delivery workers: the delivery stream → email, WhatsApp, webhooks (needs NATS_URL)
 */
import type { SluiceConfig } from '../core/config.ts';
import type { Logger } from '../core/log.ts';
import { ByteBudget } from '../core/byte-budget.ts';
import { describeMemoryPlan, planMemory, withMemoryPlan, type MemoryPlan, type ProcessParts } from '../core/memory-budget.ts';
import { MemoryGuard } from '../core/memory-guard.ts';
import type { SluiceMetrics } from '../core/metrics.ts';
import type { Readiness } from '../core/readiness.ts';
import { IngestService } from '../pipeline/ingest.ts';
import { PipelinePool } from '../pipeline/pool.ts';
import { storageSink } from '../bus/storage-sink.ts';
import type { TranscoderStatus } from '../pipeline/wasm/select.ts';
import type { Storage } from '../storage/storage.ts';
import type { StateStore } from '../state/store.ts';
import { clientIpResolver } from '../gateway/client-ip.ts';
import { OtlpGrpcServer } from '../gateway/grpc/server.ts';
import { createHttpServer, listenOn } from '../gateway/http/index.ts';
import { ingestRoutes, metricsHandler, opsRoutes } from '../gateway/routes.ts';
import type { AgentConfigs } from '../gateway/agent-configs.ts';
import type { InstallTokens } from '../gateway/install-tokens.ts';
import type { SourceRegistry } from '../gateway/sources.ts';
import { captchaSettings, grpcLimits, httpServerOptions, idempotencyLeaseMs, maxChunkBytes, publicUrl, queryLimits, relayPublicUrl } from './components.ts';
import { ControlServer } from './control.ts';
import { serverGraceMs, SluiceGraph, type RelayConsoleParts } from './graph.ts';
import { MAX_RELAY_BODY_BYTES, openPublicRelay, relayAlerts, relayConsoleAdmin, relayHttpHandler, type Relay } from '../relay/index.ts';
import { RENDER_THREADS } from '../relay/render-pool.ts';
import { MAX_QUERY_BODY_BYTES, openQueryEndpoint } from '../query/index.ts';
import { MAX_CONSOLE_BODY_BYTES } from '../console/index.ts';

export type Role = 'serve' | 'gateway' | 'consume' | 'deliver';

/** The relay as served by a front end: its module and its port. */
export interface RunningRelay extends Relay {
  port: number;
}

/** The web console as served: its port, the URL users open, the first owner's link while there is none. */
export interface RunningConsole {
  port: number;
  url: string;
  firstRunLink: string | undefined;
}

export interface RunningSluice {
  httpPort: number;
  /** 0 when this role has no gRPC front end. */
  grpcPort: number;
  /** The read-only ClickHouse endpoint of `serve` on the embedded default (SLUICE_QUERY_PORT); 0 when off. */
  queryPort: number;
  /** The OTLP transcoder the worker threads run (SLUICE_TRANSCODER); undefined in a role without them. */
  transcoder: TranscoderStatus | undefined;
  /** The notification relay, on roles with a front end (cluster: when SLUICE_RELAY_MASTER_KEY is set). */
  relay: RunningRelay | undefined;
  /** The web console, where this role serves it (config console.enabled). */
  console: RunningConsole | undefined;
  /** Undefined for `gateway`, which stores nothing itself. */
  storage: Storage | undefined;
  state: StateStore;
  sources: SourceRegistry;
  configs: AgentConfigs;
  installTokens: InstallTokens;
  metrics: SluiceMetrics;
  readiness: Readiness;
  /** How the memory budget was divided (SLUICE_MEMORY_BUDGET_MB). */
  memory: MemoryPlan;
  /** Stops everything; `deadline` (epoch ms) bounds how long requests in flight and flushing may take. */
  shutdown(deadline?: number): Promise<void>;
  /** The shutdown step under way (for the log when a shutdown runs out of time). */
  stopping(): string | undefined;
}

/** What runs in a process of `role` (the memory budget is divided among these). */
export function processParts(role: Role, config: Readonly<SluiceConfig>): ProcessParts {
  const relay = role === 'deliver' || ((role === 'serve' || role === 'gateway') && (!config.nats.url || config.relay.masterKey !== ''));
  return {
    chdb: (role === 'serve' || role === 'consume') && !config.clickhouse.url,
    frontEnd: role === 'serve' || role === 'gateway',
    renderThreads: relay ? RENDER_THREADS : 0,
  };
}

export async function startSluice(role: Role, given: Readonly<SluiceConfig>, log: Logger): Promise<RunningSluice> {
  if (role !== 'serve' && !given.nats.url) throw new Error(`sluice ${role} runs in cluster mode: set NATS_URL`);
  if (role === 'deliver' && !given.relay.masterKey) throw new Error('sluice deliver opens the relay\'s secrets: set SLUICE_RELAY_MASTER_KEY (the same as the gateways\')');
  // The memory budget is divided before anything is built; the options it decides are read from `config`.
  const plan = planMemory(given, processParts(role, given));
  const config = withMemoryPlan(given, plan);
  const withStorage = role === 'serve' || role === 'consume';
  const guard = plan.budgetBytes > 0 ? new MemoryGuard({ budgetBytes: plan.budgetBytes, retryAfterSeconds: config.storage.retryAfterSeconds }) : undefined;
  const graph = new SluiceGraph(config, log, withStorage, { plan, guard });
  const { metrics, readiness } = graph;
  const withFrontEnd = role === 'serve' || role === 'gateway';
  if (plan.grownFromMb) {
    // A warning where the user's own options took the default past what fits a 1 GiB machine; a thread per core is expected.
    const level = plan.explicit.length > 0 ? 'warn' : 'info';
    log[level]({ role, ...describeMemoryPlan(plan) }, `memory budget: the default of ${plan.grownFromMb} MiB is too small for this process's threads and options, so it is ${plan.budgetBytes / 1024 / 1024} MiB (set SLUICE_MEMORY_BUDGET_MB to choose)`);
  } else {
    log.info({ role, ...describeMemoryPlan(plan) }, 'memory budget (SLUICE_MEMORY_BUDGET_MB)');
  }
  if (guard) {
    readiness.register('memory', () => guard.status());
    metrics.memorySource = () => guard.figures;
  }
  try {
    // chDB and the local state store live in the data dir: one owning process at a time.
    const ownsDataDir = !config.nats.url || (withStorage && !config.clickhouse.url);
    if (ownsDataDir) await graph.lockDataDir();
    // The worker threads start while the rest is built, and are waited for before the first port opens.
    const pool = withFrontEnd
      ? new PipelinePool({
        workers: config.pipeline.workers,
        retryAfterSeconds: config.storage.retryAfterSeconds,
        maxHeapMb: config.pipeline.workerHeapMb,
        onOutOfMemory: graph.workerOutOfMemory('pool'),
        transcoder: config.pipeline.transcoder,
        onTranscoderFallback: graph.transcoderFallback(),
      })
      : undefined;
    if (pool) {
      void pool.start().catch(() => {}); // its failure is thrown where it is waited for
      graph.onStop('worker pool', () => pool.shutdown());
      readiness.register('pool', () => pool.status());
    }
    const nc = await graph.nats();
    const state = await graph.state();
    const sources = await graph.sources();
    const configs = await graph.configs();
    const installTokens = await graph.installTokens();
    const storage = withStorage ? await graph.storage(role === 'serve') : undefined;
    const bus = await graph.bus();
    if (storage) bus.consume(storageSink(storage, metrics));
    graph.registerBus(bus);

    const servers: Array<{ close(graceMs: number): Promise<void> }> = [];
    let grpcPort = 0;
    let httpPort = 0;
    let queryPort = 0;
    let relay: RunningRelay | undefined;
    let consoleServing: RunningConsole | undefined;
    let handler = opsRoutes({ metrics, readiness, log });
    // One resolver of client addresses for every port that limits per client.
    const clientIp = clientIpResolver(config.limits.trustedProxies);
    if (pool) {
      // One byte budget per process: request bytes from admission until the bus settled them.
      const budget = new ByteBudget({
        limitBytes: config.limits.maxInFlightBytes,
        retryAfterSeconds: config.storage.retryAfterSeconds,
        onRefusal: () => metrics.byteBudgetRefusals.inc(),
        memory: guard,
      });
      metrics.byteBudgetSource = () => budget.figures;
      readiness.register('inflight', () => budget.status());
      await pool.start();
      const { transcoder, problem } = pool.transcoder!;
      if (problem) log.warn({ setting: config.pipeline.transcoder, transcoder, problem }, 'the worker threads transcode OTLP with JavaScript');
      const ingest = new IngestService(
        pool,
        bus,
        metrics,
        { maxBodyBytes: config.limits.maxBodyBytes, maxChunkBytes: maxChunkBytes(nc) },
        (detail) => log.error({ detail }, 'pipeline task failed unexpectedly'),
      );
      const guards = { auth: sources, limiter: await graph.limiter('ingest'), clientIp, budget };
      const tally = await graph.ingestTally();
      handler = ingestRoutes({ ...guards, ingest, tally, metrics, readiness, log, configs, installTokens, publicUrl: () => publicUrl(config, httpPort) });

      const grpc = new OtlpGrpcServer({ ...guards, ingest, tally, metrics, log, maxBodyBytes: config.limits.maxBodyBytes, limits: await grpcLimits(config) });
      grpcPort = await listenOn(grpc, config.host, config.grpc.port, 'OTLP/gRPC port (SLUICE_OTLP_GRPC_PORT)');
      servers.push(grpc);
      graph.onStop('gRPC server', (deadline) => grpc.close(serverGraceMs(deadline)));

      // Alert rules notify through the relay, and its admin is in the console: where the relay runs.
      let relayParts: RelayConsoleParts | undefined;
      if (nc && !config.relay.masterKey) {
        log.warn('relay disabled: set SLUICE_RELAY_MASTER_KEY (the same on every gateway) to run it in cluster mode');
      } else {
        const opened = await graph.relay();
        let relayPort = 0;
        const publicRelay = openPublicRelay(opened, {
          bus,
          deliveries: await graph.deliveryQueue(),
          history: await graph.attemptLog(),
          budget,
          limiters: { submissions: await graph.limiter('submissions'), notifications: await graph.limiter('notifications'), discovery: await graph.limiter('discovery') },
          clientIp: guards.clientIp,
          captcha: captchaSettings(config),
          idempotencyLeaseMs: idempotencyLeaseMs(config),
          signInUrl: () => `${relayPublicUrl(config, relayPort)}/api/v1/admin/login`,
          onAnswer: (endpoint, status) => metrics.relayRequests.inc({ endpoint, status: String(status) }),
          log,
        });
        graph.onStop('relay background work', () => publicRelay.shutdown());
        relayParts = {
          alerts: relayAlerts(opened, { bus, deliveries: await graph.deliveryQueue(), history: await graph.attemptLog(), log }),
          admin: relayConsoleAdmin(opened),
          url: () => relayPublicUrl(config, relayPort),
        };
        const relayHandler = relayHttpHandler(opened, {
          signInLimiter: await graph.limiter('sign-in'),
          clientIp: guards.clientIp,
          operatorToken: config.relay.operatorToken,
          publicRelay,
          budget,
          metrics: metricsHandler(metrics),
          log,
        });
        const server = createHttpServer(config.http.engine, relayHandler, httpServerOptions(config, MAX_RELAY_BODY_BYTES), log);
        relayPort = await listenOn(server, config.host, config.relay.port, 'relay port (SLUICE_RELAY_PORT)');
        relay = { ...opened, port: relayPort };
        servers.push(server);
        graph.onStop('relay server', (deadline) => server.close(serverGraceMs(deadline)));
      }

      // The console reads storage and signs sessions: in a cluster it needs CLICKHOUSE_URL and the shared master key.
      if (config.console.enabled && nc && !(config.relay.masterKey && config.clickhouse.url)) {
        log.warn('console disabled: set SLUICE_RELAY_MASTER_KEY (the same on every gateway) and CLICKHOUSE_URL to serve it in cluster mode');
      } else if (config.console.enabled) {
        // The gRPC port on the ingest URL's host (URL.hostname keeps an IPv6 address's brackets).
        const ingestHost = new URL(publicUrl(config, httpPort)).hostname;
        const opened = await graph.console({
          clientIp,
          budget,
          ingest: () => ({ otlpHttp: publicUrl(config, httpPort), otlpGrpc: `http://${ingestHost}:${grpcPort}` }),
        }, relayParts);
        const server = createHttpServer(config.http.engine, opened.handler, httpServerOptions(config, MAX_CONSOLE_BODY_BYTES), log);
        const port = await listenOn(server, config.host, config.console.port, 'console port (SLUICE_CONSOLE_PORT)');
        servers.push(server);
        graph.onStop('console server', (deadline) => server.close(serverGraceMs(deadline)));
        const url = opened.bind(port);
        const firstRunLink = await opened.firstRunLink();
        if (firstRunLink) log.info({ link: firstRunLink }, 'console: open this one-time link to sign in as its first owner');
        consoleServing = { port, url, firstRunLink };
      }
    }
    // The query endpoint reads the embedded engine: `serve` without NATS or CLICKHOUSE_URL (config.ts refuses it otherwise).
    if (role === 'serve' && config.query.port > 0) {
      const queryHandler = await openQueryEndpoint({
        runner: await graph.chdbReader(),
        user: config.query.user,
        password: config.query.password,
        database: config.storage.database,
        limits: queryLimits(config),
        maxConcurrent: config.query.maxConcurrent,
        failedAuthLimiter: await graph.limiter('query-auth'),
        clientIp,
        onAnswer: (status) => metrics.queryRequests.inc({ status }),
        log,
      });
      const server = createHttpServer(config.http.engine, queryHandler, httpServerOptions(config, MAX_QUERY_BODY_BYTES), log);
      queryPort = await listenOn(server, config.host, config.query.port, 'query port (SLUICE_QUERY_PORT)');
      servers.push(server);
      graph.onStop('query server', (deadline) => server.close(serverGraceMs(deadline)));
    }
    // Delivery runs where jobs are worked: every `deliver`, and `serve` (in a cluster beside the `deliver` processes).
    if (role === 'deliver' || (role === 'serve' && relay)) await graph.deliveryWorker();

    // Every role answers health, readiness and /metrics; the front end also takes ingestion.
    const http = createHttpServer(config.http.engine, handler, httpServerOptions(config, config.limits.maxBodyBytes), log);
    httpPort = await listenOn(http, config.host, config.http.port, 'HTTP port (SLUICE_OTLP_HTTP_PORT)');
    metrics.recordBuild(http.engine, pool?.transcoder?.transcoder ?? 'none');
    servers.push(http);
    graph.onStop('HTTP server', (deadline) => http.close(serverGraceMs(deadline)));
    // Stopping, every port stops taking connections at once and their requests in flight share
    // one grace (each server's own stop above then finds it closed; those are for a failed start).
    graph.onStop('front ends', async (deadline) => {
      const graceMs = serverGraceMs(deadline);
      await Promise.all(servers.map((server) => server.close(graceMs)));
    });

    if (ownsDataDir) {
      // The CLI reaches this process's storage and state through the control socket.
      const admin = await graph.admin(publicUrl(config, httpPort), async () => {
        if (!storage) throw new Error('this process has no storage');
        return storage;
      });
      const control = new ControlServer(config.dataDir, admin);
      await control.start();
      graph.onStop('control socket', () => control.shutdown());
    }

    log.info({ role, host: config.host, httpPort, grpcPort, relayPort: relay?.port ?? 0, queryPort, consolePort: consoleServing?.port ?? 0, dataDir: config.dataDir, cluster: !!nc, engine: http.engine, transcoder: pool?.transcoder?.transcoder ?? 'none' }, 'sluice is serving');
    return { httpPort, grpcPort, queryPort, transcoder: pool?.transcoder, relay, console: consoleServing, storage, state, sources, configs, installTokens, metrics, readiness, memory: plan, shutdown: (deadline) => graph.shutdown(deadline), stopping: () => graph.stopping };
  } catch (err) {
    await graph.shutdown();
    throw err;
  }
}

/** `sluice serve`. */
export function startServe(config: Readonly<SluiceConfig>, log: Logger): Promise<RunningSluice> {
  return startSluice('serve', config, log);
}
