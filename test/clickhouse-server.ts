/**
 * A clickhouse-server of a test's own: loopback only, random ports, a temp dir, user `default`
 * without password. The binary must be installed (deploy/services.sh installs it; CI runs that
 * script): without it the test FAILS, it never skips.
 *
 * The server here is Debian's package, ClickHouse 18.16 (see storage/clickhouse.test.ts for
 * what it cannot do).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freePort } from './free-port.ts';

export interface ClickhouseServer {
  /** `http://default@127.0.0.1:<port>` */
  url: string;
  process: ChildProcess;
  dir: string;
  /** Kills the server and removes its directory. */
  stop(): Promise<void>;
}

function findBinary(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/bin', '/usr/local/bin'];
  return dirs.map((dir) => join(dir, name)).find((path) => existsSync(path));
}

class PortTaken extends Error {}

/** Another process may bind a free port before the server does: then the server starts again on others. */
export async function startClickhouseServer(): Promise<ClickhouseServer> {
  const binary = findBinary('clickhouse-server');
  if (!binary) {
    throw new Error('clickhouse-server is not installed: run deploy/services.sh (as CI does). This suite needs a real server and does not skip.');
  }
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOn(binary);
    } catch (err) {
      if (!(err instanceof PortTaken) || attempt === 3) throw err;
    }
  }
}

/** How long a starting server may take to answer. */
const START_DEADLINE_MS = 90_000;

async function startOn(binary: string): Promise<ClickhouseServer> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-clickhouse-'));
  const [httpPort, tcpPort] = [await freePort(), await freePort()];
  await writeFile(join(dir, 'config.xml'), `<?xml version="1.0"?>
<yandex>
  <logger><level>information</level><log>${dir}/server.log</log><errorlog>${dir}/server.err.log</errorlog><size>10M</size><count>1</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>${httpPort}</http_port>
  <tcp_port>${tcpPort}</tcp_port>
  <path>${dir}/data/</path>
  <tmp_path>${dir}/data/tmp/</tmp_path>
  <user_files_path>${dir}/data/user_files/</user_files_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>104857600</mark_cache_size>
</yandex>
`);
  await writeFile(join(dir, 'users.xml'), `<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
`);
  const child = spawn(binary, [`--config-file=${join(dir, 'config.xml')}`], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (data) => (stderr += data));
  const url = `http://default@127.0.0.1:${httpPort}`;
  const stop = async () => {
    await stopProcess(child);
    await rm(dir, { recursive: true, force: true });
  };
  // Generous: on a loaded 2-core machine the old server took over 30 s to answer once (2026-11-28).
  const deadline = Date.now() + START_DEADLINE_MS;
  while (Date.now() < deadline && child.exitCode === null) {
    const ok = await fetch(`http://127.0.0.1:${httpPort}/ping`).then((r) => r.ok, () => false);
    if (ok) return { url, process: child, dir, stop };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await stopProcess(child);
  const log = await readFile(join(dir, 'server.err.log'), 'utf8').catch(() => '');
  await rm(dir, { recursive: true, force: true });
  const message = `clickhouse-server did not answer on ${httpPort} within ${START_DEADLINE_MS / 1000} s (exit ${child.exitCode}):\n${stderr}\n${log.slice(-2000)}`;
  throw /Address already in use/.test(log + stderr) ? new PortTaken(message) : new Error(message);
}

/** SIGKILL: a throwaway server in a temp dir needs no graceful stop (which waits ~8 s for clients). */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}
