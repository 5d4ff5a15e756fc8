/**
 * The cluster roles as bench targets: `sluice gateway` and `sluice consume` processes on a
 * nats-server of the bench's own (the machine's binary, on a free port: its CPU is only this
 * run's) under a prefix of this run's own, storing through the ClickHouse HTTP facade
 * (test/clickhouse-facade.ts: one process owning a chDB data dir, answering @clickhouse/client
 * as a ClickHouse server would). Every process's pid is known, so each one's CPU can be read on
 * its own.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { streamOf } from '../bus/jetstream-names.ts';
import { startClickhouseFacade, type ClickhouseFacade } from '../test/clickhouse-facade.ts';
import { startNatsServer, type NatsProcess } from '../test/sluice-processes.ts';
import { sluiceCli, startSluiceRole, type BenchProcess, type RoleProcess } from './target.ts';

/**
 * Bytes each row stream may hold: the gateway-only run leaves everything its saturation run
 * published (about 1.1 KB per span; the warm-up's rows are purged) in the stream for the
 * consumer, so the stream must hold the whole run, or the gateway's last requests are refused
 * with 503 and the figure measures refusals. 8 GiB hold about 35 s at 227k spans/s. JetStream
 * reserves max_bytes for every stream (one per table, 14) out of the server's max_file_store,
 * 75 % of the free disk by default, so the bench's server is told 1 TB: only what is written
 * takes disk (a few GB per run). On the machine's shared server the streams were 3.5 GiB (4 was
 * refused), and a 15 s run filled them at 227k spans/s (2026-11-25).
 */
const MAX_STREAM_BYTES = String(8 * 1024 ** 3);
const NATS_CONFIG = 'jetstream { max_file_store: 1TB }\n';

export interface BenchCluster {
  prefix: string;
  facade: ClickhouseFacade;
  /** nats-server, the storage facade: servers Sluice needs, measured apart from Sluice. */
  servers: BenchProcess[];
  /** `X-API-Key` of a source created for the bench. */
  apiKey: string;
  /** Starts `sluice gateway` or `sluice consume` (health-checked). */
  start(role: 'gateway' | 'consume'): Promise<RoleProcess>;
  /** Messages in the table's stream: published and not yet stored and acknowledged by a consumer. */
  backlog(table: string): Promise<number>;
  /** Drops every message of the table's stream (acknowledged rows that will never be stored). */
  purge(table: string): Promise<void>;
  /** Rows in the table, read through the facade. */
  stored(table: string): Promise<number>;
  /** Stops the Sluice processes, the run's nats-server (its store deleted) and the facade. */
  stop(): Promise<void>;
}

/**
 * A nats-server, the facade (with the schema: `sluice migrate`), a source, and a prefix of this
 * run's own. Every `SLUICE_*` of the bench's environment reaches the processes
 * (SLUICE_WORKERS...), after the bench's defaults and before the addresses.
 */
export async function startBenchCluster(): Promise<BenchCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-nats-'));
  const prefix = `BENCH${randomBytes(4).toString('hex').toUpperCase()}`;
  const processes: RoleProcess[] = [];
  let nats: NatsProcess | undefined;
  let nc: NatsConnection | undefined;
  let facade: ClickhouseFacade | undefined;
  const stop = async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await nc?.close();
    await nats?.stop('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
    await facade?.stop();
  };
  try {
    writeFileSync(join(dir, 'nats.conf'), NATS_CONFIG);
    const server = (nats = await startNatsServer(join(dir, 'jetstream'), ['-c', join(dir, 'nats.conf')]));
    const jsm = await jetstreamManager((nc = await connect({ servers: server.url })));
    facade = await startClickhouseFacade();
    const ours = Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('SLUICE_'))) as Record<string, string>;
    const env = {
      SLUICE_NATS_MAX_STREAM_BYTES: MAX_STREAM_BYTES,
      // The bench sends everything from one address.
      SLUICE_RATE_LIMIT_PER_MINUTE: '100000000',
      SLUICE_RATE_LIMIT_BURST: '100000000',
      ...ours,
      NATS_URL: server.url,
      SLUICE_NATS_PREFIX: prefix,
      CLICKHOUSE_URL: facade.url,
    };
    // The CLI runs in a process of its own, with the bench's environment and the cluster's.
    const cli = (...args: string[]) => sluiceCli({ ...process.env, ...env }, ...args);
    await cli('migrate');
    const { apiKey } = JSON.parse(await cli('sources', 'create', '--name', 'bench')) as { apiKey: string };
    const f = facade;
    return {
      prefix,
      facade: f,
      servers: [
        { name: 'nats-server', pid: server.child.pid!, server: true },
        { name: 'storage (facade)', pid: f.process.pid!, server: true },
      ],
      apiKey,
      async start(role) {
        const running = await startSluiceRole(role, env);
        processes.push(running);
        return running;
      },
      async backlog(table) {
        return (await jsm.streams.info(streamOf(prefix, table).stream)).state.messages;
      },
      async purge(table) {
        await jsm.streams.purge(streamOf(prefix, table).stream);
      },
      async stored(table) {
        const [row] = await f.rows<{ n: string | number }>(`SELECT count() AS n FROM otel.${table}`);
        return Number(row!.n);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
