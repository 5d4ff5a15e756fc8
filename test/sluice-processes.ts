/**
 * Sluice roles as real OS processes (`node bin/sluice.mjs <role>`), for tests that kill them:
 * free ports, a data dir and a log file each, health-checked before use. Also a Redis and a
 * nats-server of the test's own, which a test may stop (or freeze) without touching the shared ones.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const SLUICE = join(REPO, 'bin', 'sluice.mjs');

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer().once('error', reject).listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

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

/**
 * Starts `sluice <role>` with `env` (plus its own data dir and ports) and waits until it
 * answers /api/v1/health. Its stdout and stderr go to <dir>/<name>.log (appended: a process
 * restarted under the same name continues the file). `dataDir` restarts a process on the data
 * dir of an earlier one; `openFiles` runs it under that open-files limit (ulimit -n).
 */
export async function startSluiceProcess(role: SluiceRole, name: string, dir: string, env: Record<string, string>, options: { dataDir?: string; openFiles?: number } = {}): Promise<SluiceProcess> {
  const [httpPort, grpcPort] = [await freePort(), await freePort()];
  // The relay's default port (8080) would collide between processes.
  const relayPort = role === 'serve' || role === 'gateway' ? await freePort() : 0;
  const dataDir = options.dataDir ?? (await mkdtemp(join(dir, `${name}-`)));
  const logFile = join(dir, `${name}.log`);
  const fd = openSync(logFile, 'a');
  // prlimit sets the open-files limit and execs node: the child's pid is node's.
  const command = options.openFiles ? ['prlimit', `--nofile=${options.openFiles}`, process.execPath] : [process.execPath];
  const child = spawn(command[0]!, [...command.slice(1), SLUICE, role], {
    cwd: REPO,
    stdio: ['ignore', fd, fd],
    env: childEnv({
      SLUICE_DATA_DIR: dataDir,
      SLUICE_OTLP_HTTP_PORT: String(httpPort),
      SLUICE_OTLP_GRPC_PORT: String(grpcPort),
      ...(relayPort ? { SLUICE_RELAY_PORT: String(relayPort) } : {}),
      SLUICE_CONSOLE_PORT: '0',
      SLUICE_LOG_LEVEL: process.env.SLUICE_TEST_LOG_LEVEL ?? 'warn',
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
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`sluice ${role} (${name}) exited with ${child.exitCode ?? child.signalCode} before it served:\n${(await log()).slice(-3000)}`);
    }
    const healthy = await fetch(`${baseUrl}/api/v1/health`).then((r) => r.ok, () => false);
    if (healthy) return running;
    if (Date.now() > deadline) {
      await running.stop('SIGKILL');
      throw new Error(`sluice ${role} (${name}) did not answer health in 30 s:\n${(await log()).slice(-3000)}`);
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

/** A redis-server of this test's own: random port, no persistence. */
export async function startRedis(): Promise<RedisProcess> {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (err) => reject(new Error(`redis-server could not start (run deploy/services.sh): ${err.message}`)));
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    const open = await Promise.race([failed, portOpen(port)]);
    if (open) break;
    if (Date.now() > deadline) throw new Error('redis-server did not listen in 10 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
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

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
      .once('connect', () => {
        socket.destroy();
        resolve(true);
      })
      .once('error', () => resolve(false));
  });
}

export interface NatsProcess {
  url: string;
  child: ChildProcess;
  /** SIGSTOP: the server freezes with its connections open (writes to it pile up in the clients). */
  freeze(): void;
  /** SIGCONT after freeze(). */
  thaw(): void;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** A nats-server with JetStream of this test's own: random port, its store under `storeDir`. */
export async function startNatsServer(storeDir: string): Promise<NatsProcess> {
  const port = await freePort();
  const child = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], { stdio: 'ignore' });
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (err) => reject(new Error(`nats-server could not start (run deploy/services.sh): ${err.message}`)));
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    const open = await Promise.race([failed, portOpen(port)]);
    if (open) break;
    if (Date.now() > deadline) throw new Error('nats-server did not listen in 10 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    child,
    freeze: () => child.kill('SIGSTOP'),
    thaw: () => child.kill('SIGCONT'),
    async stop(signal = 'SIGKILL') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGCONT');
      child.kill(signal);
      await exited(child, 10_000);
    },
  };
}
