/**
 * Composition root: builds the components for a role from the validated config and starts
 * them in dependency order; shutdown() stops them in reverse, draining in-flight work.
 */
import { join } from 'node:path';
import type { SluiceConfig } from '../core/config.ts';
import type { Logger } from '../core/log.ts';
import { SluiceMetrics } from '../core/metrics.ts';
import { MemoryBus } from '../bus/memory.ts';
import { IngestService } from '../pipeline/ingest.ts';
import { PipelinePool } from '../pipeline/pool.ts';
import { LocalStateStore } from '../state/local.ts';
import { storageSink } from '../storage/sink.ts';
import type { Storage } from '../storage/storage.ts';
import { clientIpResolver } from '../gateway/client-ip.ts';
import { OtlpGrpcServer } from '../gateway/grpc/server.ts';
import { createHttpServer } from '../gateway/http/index.ts';
import { TokenBucketLimiter } from '../gateway/limiter.ts';
import { ingestRoutes } from '../gateway/routes.ts';
import { SourceRegistry } from '../gateway/sources.ts';
import { LocalAdmin } from './admin.ts';
import { announceStorage, createStorage, schemaOptions } from './components.ts';
import { ControlServer } from './control.ts';
import { lockDataDir } from './lock.ts';

export interface RunningSluice {
  httpPort: number;
  grpcPort: number;
  storage: Storage;
  sources: SourceRegistry;
  metrics: SluiceMetrics;
  shutdown(): Promise<void>;
}

/** `sluice serve`: every role in one process, on the embedded default. */
export async function startServe(config: Readonly<SluiceConfig>, log: Logger): Promise<RunningSluice> {
  const stops: Array<() => Promise<void>> = [];
  const shutdown = async () => {
    for (const stop of stops.reverse()) await stop().catch((err) => log.error({ err }, 'shutdown step failed'));
    stops.length = 0;
  };
  try {
    stops.push(await lockDataDir(config.dataDir));

    const storage = createStorage(config, { migrateOnStart: true });
    await storage.start();
    stops.push(() => storage.shutdown());
    announceStorage(storage, log);

    const state = new LocalStateStore(join(config.dataDir, 'state'));
    await state.start();
    stops.push(() => state.shutdown());
    const sources = new SourceRegistry(state);
    await sources.start();
    stops.push(() => sources.shutdown());

    const metrics = new SluiceMetrics();
    const bus = new MemoryBus({
      maxPendingBytes: config.storage.maxPendingBytes,
      maxBatchBytes: Math.min(64 * 1024 * 1024, config.storage.maxPendingBytes),
      timeoutMs: config.storage.timeoutMs,
      retryAfterSeconds: config.storage.retryAfterSeconds,
    });
    metrics.backlogSource = () => bus.backlogBytes;
    bus.consume(storageSink(storage, metrics));
    await bus.start();
    stops.push(() => bus.shutdown());

    const pool = new PipelinePool({
      workers: config.pipeline.workers,
      maxQueuedBytes: config.storage.maxPendingBytes,
      retryAfterSeconds: config.storage.retryAfterSeconds,
    });
    await pool.start();
    stops.push(() => pool.shutdown());

    // The in-process bus has no message size limit: one chunk per table per request.
    const ingest = new IngestService(pool, bus, metrics, { maxBodyBytes: config.limits.maxBodyBytes, maxChunkBytes: Infinity }, (detail) =>
      log.error({ detail }, 'pipeline task failed unexpectedly'),
    );
    const limiter = new TokenBucketLimiter({ ratePerMinute: config.limits.ratePerMinute, burst: config.limits.rateBurst });
    stops.push(() => limiter.shutdown());
    const guards = { auth: sources, limiter, clientIp: clientIpResolver(config.limits.trustedProxies) };

    const http = createHttpServer(config.http.engine, ingestRoutes({ ...guards, ingest, metrics, log }), { maxBodyBytes: config.limits.maxBodyBytes }, log);
    const httpPort = await http.listen(config.host, config.http.port);
    stops.push(() => http.close());

    const grpc = new OtlpGrpcServer({ ...guards, ingest, metrics, log, maxBodyBytes: config.limits.maxBodyBytes });
    const grpcPort = await grpc.listen(config.host, config.grpc.port);
    stops.push(() => grpc.close());

    const control = new ControlServer(config.dataDir, new LocalAdmin(sources, async () => storage, config.storage.database, schemaOptions(config)));
    await control.start();
    stops.push(() => control.shutdown());

    log.info({ host: config.host, httpPort, grpcPort, dataDir: config.dataDir, engine: config.http.engine }, 'sluice is serving');
    return { httpPort, grpcPort, storage, sources, metrics, shutdown };
  } catch (err) {
    await shutdown();
    throw err;
  }
}
