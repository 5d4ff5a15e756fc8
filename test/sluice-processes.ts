/**
 * Sluice roles as real OS processes (`node bin/sluice.mjs <role>`), for tests that kill them:
 * free ports, a data dir and a log file each, health-checked before use. Also a Redis and a
 * nats-server of the test's own, which a test may stop (or freeze) without touching the shared ones.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SLUICE_NODE_FLAGS } from '../bin/node-flags.ts';
import { freePort } from './free-port.ts';

/** How long a started process may take to answer health. */
const START_DEADLINE_MS = 90_000;

const REPO = fileURLToPath(new URL('..', import.meta.url));
const SLUICE = join(REPO, 'bin', 'sluice.mjs');

export { freePort };

/** The environment of a child: PATH and HOME only, then the given variables (no SLUICE_* leaks in). */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, ...env };
}

async function exited(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** The roles of `sluice` (bin/app.ts). */
export type SluiceRole = 'serve' | 'gateway' | 'consume' | 'deliver';

export interface SluiceProcess {
  name: string;
  child: ChildProcess;
  httpPort: number;
  grpcPort: number;
  /** The relay port given to roles with a front end (`serve`, `gateway`); 0 for the others. */
  relayPort: number;
  baseUrl: string;
  /** The process's data dir (the one given, or a fresh one). */
  dataDir: string;
  logFile: string;
  /** Sends a signal and waits for the exit (SIGKILL if SIGTERM was not enough within 10 s). */
  stop(signal?: NodeJS.Signals): Promise<void>;
  metrics(): Promise<string>;
  log(): Promise<string>;
}

export interface SluiceProcessOptions {
  dataDir?: string;
  ports?: Pick<SluiceProcess, 'httpPort' | 'grpcPort' | 'relayPort'>;
  openFiles?: number;
  nodeFlags?: string[];
}

/**
 * Starts `sluice <role>` with `env` (plus its own data dir and ports) and waits until it
 * answers /api/v1/health. Its stdout and stderr go to <dir>/<name>.log (appended: a process
 * restarted under the same name continues the file). `dataDir` restarts a process on the data
 * dir of an earlier one; `ports` on its ports (those of a SluiceProcess); `openFiles` runs it
 * under that open-files limit (ulimit -n); `nodeFlags` are added to Node's command line.
 */
export async function startSluiceProcess(role: SluiceRole, name: string, dir: string, env: Record<string, string>, options: SluiceProcessOptions = {}): Promise<SluiceProcess> {
  const httpPort = options.ports?.httpPort ?? await freePort();
  const grpcPort = options.ports?.grpcPort ?? await freePort();
  // The relay's default port (8080) would collide between processes.
  const relayPort = role === 'serve' || role === 'gateway' ? options.ports?.relayPort ?? await freePort() : 0;
  const dataDir = options.dataDir ?? (await mkdtemp(join(dir, `${name}-`)));
  const logFile = join(dir, `${name}.log`);
  const fd = openSync(logFile, 'a');
  // prlimit sets the open-files limit and execs node: the child's pid is node's.
  const command = options.openFiles ? ['prlimit', `--nofile=${options.openFiles}`, process.execPath] : [process.execPath];
  const child = spawn(command[0]!, [...command.slice(1), ...SLUICE_NODE_FLAGS, ...(options.nodeFlags ?? []), SLUICE, role], {
    cwd: REPO,
    stdio: ['ignore', fd, fd],
    env: childEnv({
      SLUICE_DATA_DIR: dataDir,
      SLUICE_OTLP_HTTP_PORT: String(httpPort),
      SLUICE_OTLP_GRPC_PORT: String(grpcPort),
      ...(relayPort ? { SLUICE_RELAY_PORT: String(relayPort) } : {}),
      SLUICE_CONSOLE_PORT: '0',
      SLUICE_LOG_LEVEL: process.env.SLUICE_TEST_LOG_LEVEL ?? 'warn',
      // As `npm start` and the image run it: glibc gives freed blocks back (docs/guides/operating.md).
      MALLOC_MMAP_THRESHOLD_: '131072',
      ...env,
    }),
  });
  closeSync(fd);
  const baseUrl = `http://127.0.0.1:${httpPort}`;
  const log = () => readFile(logFile, 'utf8').catch(() => '');
  const running: SluiceProcess = {
    name,
    child,
    httpPort,
    grpcPort,
    relayPort,
    baseUrl,
    dataDir,
    logFile,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      if (!(await exited(child, 10_000))) {
        child.kill('SIGKILL');
        await exited(child, 10_000);
      }
    },
    metrics: async () => (await fetch(`${baseUrl}/metrics`)).text(),
    log,
  };
  // A deadline, not a measure: on a loaded 2-core CI machine several processes start at once
  // (each bundles its workers with esbuild and loads chDB or connects to NATS); 30 s was missed there.
  const deadline = Date.now() + START_DEADLINE_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`sluice ${role} (${name}) exited with ${child.exitCode ?? child.signalCode} before it served:\n${(await log()).slice(-3000)}`);
    }
    const healthy = await fetch(`${baseUrl}/api/v1/health`).then((r) => r.ok, () => false);
    if (healthy) return running;
    if (Date.now() > deadline) {
      await running.stop('SIGKILL');
      throw new Error(`sluice ${role} (${name}) did not answer health in ${START_DEADLINE_MS / 1000} s:\n${(await log()).slice(-3000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Runs a `sluice` CLI command to completion and returns its stdout (rejects with its stderr). */
export function runSluice(args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [SLUICE, ...args], { cwd: REPO, env: childEnv(env), timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`sluice ${args.join(' ')} failed: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

export interface RedisProcess {
  url: string;
  child: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * A redis-server of this test's own: random port, no persistence. Redis cannot pick its port and
 * say which, so the port is chosen here, and the server that answers on it must be ours (its
 * INFO's process_id): another test's server may have taken the port meanwhile.
 */
export async function startRedis(): Promise<RedisProcess> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    const failed = new Promise<never>((_, reject) => {
      child.once('error', (err) => reject(new Error(`redis-server could not start (run deploy/services.sh): ${err.message}`)));
    });
    const deadline = Date.now() + 10_000;
    let pid: number | undefined;
    while (pid === undefined && child.exitCode === null) {
      pid = await Promise.race([failed, redisPid(port)]);
      if (Date.now() > deadline) throw new Error('redis-server did not listen in 10 s');
      if (pid === undefined) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (pid === child.pid) {
      return {
        url: `redis://127.0.0.1:${port}`,
        child,
        async stop(signal = 'SIGKILL') {
          if (child.exitCode !== null || child.signalCode !== null) return;
          child.kill(signal);
          await exited(child, 10_000);
        },
      };
    }
    child.kill('SIGKILL');
    if (attempt === 3) throw new Error(`redis-server did not start three times; last on port ${port}: ${pid ? `process ${pid} answered there, not ours` : 'it exited'}`);
  }
}

/** The process id the Redis server on `port` reports, or undefined while nothing answers there. */
function redisPid(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    let text = '';
    const socket = connect(port, '127.0.0.1', () => socket.write('INFO server\r\n'));
    socket.setEncoding('utf8');
    socket.setTimeout(2000, () => socket.destroy());
    socket.on('data', (chunk: string) => {
      text += chunk;
      const found = /process_id:(\d+)/.exec(text);
      if (found) {
        socket.destroy();
        resolve(Number(found[1]));
      }
    });
    socket.once('error', () => resolve(undefined));
    socket.once('close', () => resolve(undefined));
  });
}

/** A thread's state letter: the field after its name, which ends with the stat line's last ')'. A thread gone counts as stopped. */
async function threadState(statFile: string): Promise<string> {
  const stat = await readFile(statFile, 'utf8').catch(() => undefined);
  return stat === undefined ? 'T' : stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

/** Waits until every thread of the process is stopped (state T in /proc/<pid>/task/<tid>/stat). */
async function untilStopped(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const threads = await readdir(`/proc/${pid}/task`);
    const states = await Promise.all(threads.map((tid) => threadState(`/proc/${pid}/task/${tid}/stat`)));
    if (states.every((state) => state === 'T')) return;
    if (Date.now() > deadline) throw new Error(`process ${pid} did not stop in ${timeoutMs} ms (thread states ${states.join('')})`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export interface NatsProcess {
  url: string;
  child: ChildProcess;
  /**
   * SIGSTOP, resolved once every thread of the server has stopped (a thread running on the other
   * core could otherwise still answer what is sent next): it freezes with its connections open,
   * and writes to it pile up in the clients.
   */
  freeze(): Promise<void>;
  /** SIGCONT after freeze(). */
  thaw(): void;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * A nats-server with JetStream of this test's own, its store under `storeDir`. It picks its port
 * itself (`-p -1`) and says which in its log: a port chosen here and then bound by the server
 * could meanwhile be taken by another test's server, and this test would talk to that one.
 */
export async function startNatsServer(storeDir: string, extraArgs: readonly string[] = []): Promise<NatsProcess> {
  const child = spawn('nats-server', ['-a', '127.0.0.1', '-p', '-1', '-js', '-sd', storeDir, ...extraArgs], { stdio: ['ignore', 'ignore', 'pipe'] });
  const port = await new Promise<number>((resolve, reject) => {
    let log = '';
    const timer = setTimeout(() => fail(new Error('nats-server did not listen in 10 s')), 10_000);
    const fail = (err: Error) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(err);
    };
    const exitedEarly = (code: number | null) => fail(new Error(`nats-server exited with ${code} before it was ready: ${log.slice(-500)}`));
    child.once('error', (err) => fail(new Error(`nats-server could not start (run deploy/services.sh): ${err.message}`)));
    child.once('exit', exitedEarly);
    child.stderr!.setEncoding('utf8').on('data', (text: string) => {
      if (log.length < 64 * 1024) log += text;
      const listening = /Listening for client connections on 127\.0\.0\.1:(\d+)/.exec(log);
      if (!listening || !log.includes('Server is ready')) return;
      clearTimeout(timer);
      child.off('exit', exitedEarly);
      resolve(Number(listening[1]));
    });
  });
  // Its later log lines are read and dropped: a full pipe would stop the server.
  child.stderr!.removeAllListeners('data').resume();
  return {
    url: `nats://127.0.0.1:${port}`,
    child,
    async freeze() {
      child.kill('SIGSTOP');
      await untilStopped(child.pid!, 10_000);
    },
    thaw: () => child.kill('SIGCONT'),
    async stop(signal = 'SIGKILL') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGCONT');
      child.kill(signal);
      await exited(child, 10_000);
    },
  };
}
