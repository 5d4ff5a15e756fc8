/**
 * Composition root: builds the components of a role from the validated config and starts them
 * in dependency order; shutdown() stops them in reverse, draining in-flight work.
 *
 *   serve    every role in one process (the embedded default, or one node of a cluster)
 *   gateway  HTTP/gRPC front end and worker pool; rows go to JetStream (needs NATS_URL)
 *   consume  storage consumer: JetStream → storage (needs NATS_URL)
 */
import type { SluiceConfig } from '../core/config.ts';
import type { Logger } from '../core/log.ts';
import { descriptorStatus } from '../core/descriptors.ts';
import { ByteBudget } from '../core/byte-budget.ts';
import { SluiceMetrics } from '../core/metrics.ts';
import { Readiness } from '../core/readiness.ts';
import { Supervisor } from '../core/supervisor.ts';
import { IngestService } from '../pipeline/ingest.ts';
import { PipelinePool } from '../pipeline/pool.ts';
import { storageSink } from '../storage/sink.ts';
import type { Storage } from '../storage/storage.ts';
import type { StateStore } from '../state/store.ts';
import { clientIpResolver } from '../gateway/client-ip.ts';
import { OtlpGrpcServer } from '../gateway/grpc/server.ts';
import { createHttpServer, listenOn } from '../gateway/http/index.ts';
import { ingestRoutes, opsRoutes } from '../gateway/routes.ts';
import { AgentConfigs } from '../gateway/agent-configs.ts';
import { InstallTokens } from '../gateway/install-tokens.ts';
import { SourceRegistry } from '../gateway/sources.ts';
import { LocalAdmin } from './admin.ts';
import {
  announceStorage,
  connectNats,
  createBus,
  createLimiter,
  createStateStore,
  createStorage,
  ingestBuckets,
  maxChunkBytes,
  publicUrl,
  relayParts,
  schemaOptions,
  storageStatus,
  watchNatsConnection,
} from './components.ts';
import { ControlServer } from './control.ts';
import { MAX_ADMIN_BODY_BYTES, openRelay, relayHttpHandler, SIGN_IN_PER_MINUTE, type Relay } from '../relay/index.ts';
import { lockDataDir } from './lock.ts';

export type Role = 'serve' | 'gateway' | 'consume';

/** The relay as served by a front end: its module and its port. */
export interface RunningRelay extends Relay {
  port: number;
}

export interface RunningSluice {
  httpPort: number;
  /** 0 when this role has no gRPC front end. */
  grpcPort: number;
  /** The notification relay, on roles with a front end (cluster: when SLUICE_RELAY_MASTER_KEY is set). */
  relay: RunningRelay | undefined;
  /** Undefined for `gateway`, which stores nothing itself. */
  storage: Storage | undefined;
  state: StateStore;
  sources: SourceRegistry;
  configs: AgentConfigs;
  installTokens: InstallTokens;
  metrics: SluiceMetrics;
  readiness: Readiness;
  shutdown(): Promise<void>;
}

export async function startSluice(role: Role, config: Readonly<SluiceConfig>, log: Logger): Promise<RunningSluice> {
  if (role !== 'serve' && !config.nats.url) throw new Error(`sluice ${role} runs in cluster mode: set NATS_URL`);
  const stops: Array<() => Promise<void>> = [];
  const shutdown = async () => {
    for (const stop of stops.reverse()) await stop().catch((err) => log.error({ err }, 'shutdown step failed'));
    stops.length = 0;
  };
  const withStorage = role !== 'gateway';
  const withFrontEnd = role !== 'consume';
  try {
    // chDB and the local state store live in the data dir: one owning process at a time.
    const ownsDataDir = !config.nats.url || (withStorage && !config.clickhouse.url);
    if (ownsDataDir) stops.push(await lockDataDir(config.dataDir));

    const metrics = new SluiceMetrics();
    const readiness = new Readiness();
    metrics.readinessSource = async () => (await readiness.report()).components;
    readiness.register('descriptors', () => descriptorStatus());
    const supervisor = new Supervisor({ log, onRestart: (loop) => metrics.loopRestarts.inc({ loop }) });
    stops.push(() => supervisor.stop());

    const nc = await connectNats(config, log);
    if (nc) {
      stops.push(() => nc.drain());
      const connection = watchNatsConnection(nc, supervisor, log);
      readiness.register('nats', connection);
    }

    const state = createStateStore(config, nc);
    await state.start();
    stops.push(() => state.shutdown());
    const sources = new SourceRegistry(state);
    await sources.start();
    stops.push(() => sources.shutdown());
    const configs = new AgentConfigs(state);
    await configs.start();
    stops.push(() => configs.shutdown());
    const installTokens = new InstallTokens(state, sources);

    let storage: Storage | undefined;
    if (withStorage) {
      storage = createStorage(config, { migrateOnStart: role === 'serve' });
      await storage.start();
      stops.push(() => storage!.shutdown());
      announceStorage(storage, log);
      readiness.register('storage', () => storageStatus(storage!));
    }

    const bus = createBus(config, nc, log, (loop) => metrics.loopRestarts.inc({ loop }));
    await bus.start();
    stops.push(() => bus.shutdown());
    metrics.busSource = () => bus.figures();
    if (storage) bus.consume(storageSink(storage, metrics));
    for (const name of Object.keys(bus.statuses())) readiness.register(name, () => bus.statuses()[name] ?? { ok: false, detail: 'gone' });

    let grpcPort = 0;
    let httpPort = 0;
    let relay: RunningRelay | undefined;
    let handler = opsRoutes({ metrics, readiness, log });
    if (withFrontEnd) {
      // One byte budget per process: request bytes from admission until the bus settled them.
      const budget = new ByteBudget({
        limitBytes: config.limits.maxInFlightBytes,
        retryAfterSeconds: config.storage.retryAfterSeconds,
        onRefusal: () => metrics.byteBudgetRefusals.inc(),
      });
      metrics.byteBudgetSource = () => budget.figures;
      readiness.register('inflight', () => budget.status());
      const pool = new PipelinePool({ workers: config.pipeline.workers, retryAfterSeconds: config.storage.retryAfterSeconds });
      await pool.start();
      stops.push(() => pool.shutdown());
      const ingest = new IngestService(
        pool,
        bus,
        metrics,
        { maxBodyBytes: config.limits.maxBodyBytes, maxChunkBytes: maxChunkBytes(nc) },
        (detail) => log.error({ detail }, 'pipeline task failed unexpectedly'),
      );
      const limiter = await createLimiter(config, log, ingestBuckets(config), `sluice:${config.nats.prefix}:rl:`);
      stops.push(() => limiter.shutdown());
      const guards = { auth: sources, limiter, clientIp: clientIpResolver(config.limits.trustedProxies), budget };
      handler = ingestRoutes({ ...guards, ingest, metrics, readiness, log, configs, installTokens, publicUrl: () => publicUrl(config, httpPort) });

      const grpc = new OtlpGrpcServer({ ...guards, ingest, metrics, log, maxBodyBytes: config.limits.maxBodyBytes });
      grpcPort = await listenOn(grpc, config.host, config.grpc.port, 'OTLP/gRPC port (SLUICE_OTLP_GRPC_PORT)');
      stops.push(() => grpc.close());

      if (nc && !config.relay.masterKey) {
        log.warn('relay disabled: set SLUICE_RELAY_MASTER_KEY (the same on every gateway) to run it in cluster mode');
      } else {
        const opened = await openRelay(await relayParts(config, state));
        stops.push(async () => opened.shutdown());
        const signInLimiter = await createLimiter(config, log, { ratePerMinute: SIGN_IN_PER_MINUTE, burst: SIGN_IN_PER_MINUTE }, `sluice:${config.nats.prefix}:relay-signin:`);
        stops.push(() => signInLimiter.shutdown());
        const handler = relayHttpHandler(opened, { signInLimiter, clientIp: guards.clientIp, operatorToken: config.relay.operatorToken, log });
        const server = createHttpServer(config.http.engine, handler, { maxBodyBytes: MAX_ADMIN_BODY_BYTES }, log);
        relay = { ...opened, port: await listenOn(server, config.host, config.relay.port, 'relay port (SLUICE_RELAY_PORT)') };
        stops.push(() => server.close());
      }
    }
    // Every role answers health and /metrics; the front end also takes ingestion.
    const http = createHttpServer(config.http.engine, handler, { maxBodyBytes: config.limits.maxBodyBytes }, log);
    httpPort = await listenOn(http, config.host, config.http.port, 'HTTP port (SLUICE_OTLP_HTTP_PORT)');
    stops.push(() => http.close());

    if (ownsDataDir) {
      // The CLI reaches this process's storage and state through the control socket.
      const admin = new LocalAdmin({
        sources,
        configs,
        installTokens,
        storage: async () => {
          if (!storage) throw new Error('this process has no storage');
          return storage;
        },
        database: config.storage.database,
        schema: schemaOptions(config),
        publicUrl: publicUrl(config, httpPort),
        relay: async () => relay ?? openRelay(await relayParts(config, state)),
      });
      const control = new ControlServer(config.dataDir, admin);
      await control.start();
      stops.push(() => control.shutdown());
    }

    log.info({ role, host: config.host, httpPort, grpcPort, relayPort: relay?.port ?? 0, dataDir: config.dataDir, cluster: !!nc, engine: config.http.engine }, 'sluice is serving');
    return { httpPort, grpcPort, relay, storage, state, sources, configs, installTokens, metrics, readiness, shutdown };
  } catch (err) {
    await shutdown();
    throw err;
  }
}

/** `sluice serve`. */
export function startServe(config: Readonly<SluiceConfig>, log: Logger): Promise<RunningSluice> {
  return startSluice('serve', config, log);
}
