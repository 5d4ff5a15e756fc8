/**
 * The cluster roles as bench targets: `sluice gateway` and `sluice consume` processes on the
 * machine's NATS (NATS_URL, default nats://127.0.0.1:4222) under a prefix of this run's own,
 * storing through the ClickHouse HTTP facade (test/clickhouse-facade.ts: one process owning a
 * chDB data dir, answering @clickhouse/client as a ClickHouse server would). Every process's pid
 * is known, nats-server's included, so each one's CPU can be read on its own.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { streamOf } from '../bus/jetstream-names.ts';
import { startClickhouseFacade, type ClickhouseFacade } from '../test/clickhouse-facade.ts';
import { sluiceCli, startSluiceRole, type BenchProcess, type RoleProcess } from './target.ts';

export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/**
 * Bytes each row stream may hold: the gateway-only run leaves everything its saturation run
 * published (about 1.1 KB per span; the warm-up's rows are purged) in the stream for the
 * consumer. 2 GiB filled up at about 150k spans/s within a 15 s run, and the gateway then
 * refused with 503 after doing all of a request's work, which inflated its CPU per acknowledged
 * span (11.7 against 6.8 CPU-s / M). JetStream reserves max_bytes for every stream, one per
 * table (14) and the delivery queue's, out of the server's storage (58 GiB here: 7 streams of
 * 8 GiB were the most it took), and the NATS is shared: 3.5 GiB each (49 GiB; 4 GiB each was
 * refused). That holds 15 s at about 220k spans/s.
 */
const MAX_STREAM_BYTES = String(3.5 * 1024 ** 3);

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
  /** Stops the Sluice processes, deletes this run's streams and buckets, stops the facade. */
  stop(): Promise<void>;
}

/** The pid of the process listening on 127.0.0.1:port (or any address), from /proc/net/tcp and each process's fds. */
export function pidListeningOn(port: number): number | undefined {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let lines: string[];
    try {
      lines = readFileSync(file, 'utf8').split('\n').slice(1);
    } catch {
      continue;
    }
    for (const line of lines) {
      const f = line.trim().split(/\s+/);
      // f[1] local address:port, f[3] state (0A = LISTEN), f[9] inode
      if (f[1]?.endsWith(`:${hexPort}`) && f[3] === '0A') inodes.add(`socket:[${f[9]}]`);
    }
  }
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or not ours to read
    }
    for (const fd of fds) {
      try {
        if (inodes.has(readlinkSync(`/proc/${pid}/fd/${fd}`))) return Number(pid);
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}

/** Deletes every stream (KV buckets included) of the prefix. */
async function removePrefix(jsm: JetStreamManager, prefix: string): Promise<void> {
  for await (const stream of jsm.streams.list()) {
    const name = stream.config.name;
    if (name.startsWith(`${prefix}_`) || name.startsWith(`KV_${prefix.toLowerCase()}_`)) await jsm.streams.delete(name);
  }
}

/**
 * The facade (with the schema: `sluice migrate`), a source, and a prefix of this run's own. Every
 * `SLUICE_*` of the bench's environment reaches the processes (SLUICE_WORKERS...), after the
 * bench's defaults and before the addresses.
 */
export async function startBenchCluster(): Promise<BenchCluster> {
  const natsPort = Number(new URL(NATS_URL.split(',')[0]!).port || 4222);
  const natsPid = pidListeningOn(natsPort);
  if (!natsPid) throw new Error(`no process listens on port ${natsPort} (NATS_URL ${NATS_URL}): start nats-server -js (deploy/services.sh)`);
  const nc: NatsConnection = await connect({ servers: NATS_URL });
  const jsm = await jetstreamManager(nc);
  const prefix = `BENCH${randomBytes(4).toString('hex').toUpperCase()}`;
  const processes: RoleProcess[] = [];
  let facade: ClickhouseFacade | undefined;
  const stop = async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await removePrefix(jsm, prefix);
    await nc.close();
    await facade?.stop();
  };
  try {
    facade = await startClickhouseFacade();
    const ours = Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('SLUICE_'))) as Record<string, string>;
    const env = {
      SLUICE_NATS_MAX_STREAM_BYTES: MAX_STREAM_BYTES,
      // The bench sends everything from one address.
      SLUICE_RATE_LIMIT_PER_MINUTE: '100000000',
      SLUICE_RATE_LIMIT_BURST: '100000000',
      ...ours,
      NATS_URL,
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
        { name: 'nats-server', pid: natsPid, server: true },
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
