/**
 * A three-node JetStream cluster on loopback for tests: three nats-server processes with cluster
 * routes to each other, each with a store dir of its own, which a test kills, freezes and
 * restarts. The machine's own nats-server (deploy/services.sh) is a single node; this one is the
 * test's alone, so killing its nodes disturbs no other test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { freePort } from './free-port.ts';

export interface NatsNode {
  /** The server_name JetStream reports (a stream's leader is named by it). */
  name: string;
  url: string;
  /** The running process's pid (undefined while it is down): the bench reads its CPU. */
  readonly pid: number | undefined;
  /** SIGKILL, and wait for the exit. */
  kill(): Promise<void>;
  /** Starts it again on the same ports and store (after kill()). */
  restart(): Promise<void>;
  /** SIGSTOP: it keeps its sockets and answers nothing, as behind a partition. */
  freeze(): void;
  thaw(): void;
}

export interface NatsCluster {
  nodes: NatsNode[];
  /** Every node's client URL, comma-separated, as NATS_URL takes them. */
  url: string;
  stop(): Promise<void>;
}

const exited = (child: ChildProcess) => new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));

/**
 * Where each node's log goes once it listens, when set (`<dir>/<name>.log`, appended across its
 * restarts): to read what the cluster did in a failed run. Otherwise later lines are dropped.
 */
const LOG_DIR = process.env.SLUICE_TEST_NATS_LOG_DIR;

/** Resolves once the node listens for clients (its log says so), or rejects. */
function listening(child: ChildProcess, name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let log = '';
    const timer = setTimeout(() => reject(new Error(`${name} did not listen in 15 s: ${log.slice(-500)}`)), 15_000);
    child.once('error', (err) => reject(new Error(`nats-server could not start (run deploy/services.sh): ${err.message}`)));
    child.stderr!.setEncoding('utf8').on('data', (text: string) => {
      if (log.length < 64 * 1024) log += text;
      if (!log.includes('Server is ready')) return;
      clearTimeout(timer);
      // Later lines are read and kept or dropped: a full pipe would stop the server.
      child.stderr!.removeAllListeners('data');
      if (LOG_DIR) {
        const file = createWriteStream(join(LOG_DIR, `${name}.log`), { flags: 'a' });
        file.write(log);
        child.stderr!.pipe(file);
      } else child.stderr!.resume();
      resolve();
    });
  });
}

/** Starts `size` JetStream nodes routed to each other and waits until JetStream answers. */
export async function startNatsCluster(dir: string, size = 3): Promise<NatsCluster> {
  const ports = await Promise.all(Array.from({ length: size }, async () => ({ client: await freePort(), cluster: await freePort() })));
  const children: Array<ChildProcess | undefined> = [];
  const nodes = ports.map(({ client, cluster }, i): NatsNode => {
    const name = `n${i + 1}`;
    const routes = ports.filter((_, j) => j !== i).map((other) => `nats://127.0.0.1:${other.cluster}`).join(',');
    const start = async () => {
      await mkdir(join(dir, name), { recursive: true });
      const child = spawn('nats-server', [
        '-a', '127.0.0.1', '-p', String(client), '-js', '-sd', join(dir, name), '--server_name', name,
        '--cluster_name', 'sluice-test', '--cluster', `nats://127.0.0.1:${cluster}`, '--routes', routes,
      ], { stdio: ['ignore', 'ignore', 'pipe'] });
      children[i] = child;
      await listening(child, name);
    };
    return {
      name,
      url: `nats://127.0.0.1:${client}`,
      get pid() {
        return children[i]?.pid;
      },
      async kill() {
        const child = children[i];
        if (!child) return;
        child.kill('SIGCONT');
        child.kill('SIGKILL');
        await exited(child);
        children[i] = undefined;
      },
      restart: start,
      freeze: () => children[i]?.kill('SIGSTOP'),
      thaw: () => children[i]?.kill('SIGCONT'),
    };
  });
  await Promise.all(nodes.map((node) => node.restart()));
  const url = nodes.map((node) => node.url).join(',');
  await untilJetStreamAnswers(url, 30_000);
  return {
    nodes,
    url,
    async stop() {
      await Promise.all(nodes.map((node) => node.kill()));
    },
  };
}

/** Until the cluster's JetStream answers (it has a meta leader), at most `ms`. */
export async function untilJetStreamAnswers(url: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      const nc = await connect({ servers: url.split(','), timeout: 2000 });
      try {
        await (await jetstreamManager(nc)).getAccountInfo();
        return;
      } finally {
        await nc.close();
      }
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`the JetStream cluster did not answer in ${ms / 1000} s: ${(err as Error).message}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}
