/**
 * deploy/services.sh, which `npm test` runs first (its `pretest` script): quick when everything
 * runs; as an unprivileged user it starts what is installed and, when a package is missing,
 * stops with one line naming the command to run as root. The unprivileged cases run as
 * `nobody` (setpriv) when the tests run as root, as on this project's machines and CI;
 * otherwise as the user running them, with SERVICES_INSTALL=never so that no test installs.
 */
import { execFile } from 'node:child_process';
import { chmod, chown, copyFile, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../test/free-port.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SCRIPT = join(ROOT, 'deploy/services.sh');
const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the script as an unprivileged user with only these settings (and PATH). The user runs a
 * copy in a directory of its own: the checkout may sit where only its owner can read (a home
 * directory of mode 0700, a `mktemp -d` folder).
 */
async function runUnprivileged(env: Record<string, string>): Promise<Outcome> {
  const settings = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: asRoot ? '/nonexistent' : process.env.HOME!, ...env };
  const copy = await directoryFor('sluice-services-script-', false);
  cleanups.push(() => rm(copy, { recursive: true, force: true }));
  const script = join(copy, 'services.sh');
  await copyFile(SCRIPT, script);
  await chmod(script, 0o644);
  const done = asRoot
    ? run('setpriv', ['--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', 'env', '-i', ...Object.entries(settings).map(([k, v]) => `${k}=${v}`), 'bash', script], { cwd: copy })
    : run('bash', [script], { cwd: copy, env: { ...settings, SERVICES_INSTALL: 'never' } });
  return done.then(({ stdout, stderr }) => ({ code: 0, stdout, stderr }), (err) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }));
}

/** A directory the unprivileged user can use (owned by it when we are root). */
async function directoryFor(prefix: string, owned: boolean): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  await chmod(dir, 0o755);
  if (asRoot && owned) await chown(dir, NOBODY, NOBODY);
  return dir;
}

/**
 * SIGTERM, then waits until the process is gone (SIGKILL after 10 s): a server still writing its
 * store while shutting down would make the removal of its directory fail (ENOTEMPTY).
 */
async function stopProcess(pid: number): Promise<void> {
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (!alive()) return;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + 10_000;
  while (alive()) {
    if (Date.now() > deadline) process.kill(pid, 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('deploy/services.sh', () => {
  it('is what `npm test` runs first', async () => {
    const scripts = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')).scripts;
    expect(scripts.pretest).toBe('bash deploy/services.sh');
  });

  it('starts nothing and returns at once when every service already runs', async () => {
    const started = performance.now();
    const { stdout } = await run('bash', [SCRIPT], { cwd: ROOT });
    const elapsedMs = performance.now() - started;
    expect(stdout).toContain('nats-server: already answering on 127.0.0.1:4222');
    expect(stdout).toContain('redis-server: already answering on 127.0.0.1:6379');
    expect(stdout).not.toMatch(/starting|installing/);
    expect(stdout.trim().split('\n').at(-1)).toBe('services: ready');
    // About 10 ms here; the bound leaves room for a loaded CI machine.
    expect(elapsedMs).toBeLessThan(3000);
  });

  it('as an unprivileged user, starts the installed NATS (with JetStream) and Redis as that user', async () => {
    const state = await directoryFor('sluice-services-state-', true);
    const [natsPort, redisPort] = [await freePort(), await freePort()];
    cleanups.push(() => rm(state, { recursive: true, force: true }));
    cleanups.push(async () => {
      for (const pidFile of ['nats/nats-server.pid', 'redis/redis-server.pid']) {
        const pid = Number(await readFile(join(state, pidFile), 'utf8').catch(() => ''));
        if (pid > 0) await stopProcess(pid);
      }
    });

    const settings = { SERVICES_STATE_DIR: state, SERVICES_NATS_PORT: String(natsPort), SERVICES_REDIS_PORT: String(redisPort) };
    const first = await runUnprivileged(settings);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toContain(`nats-server: starting on 127.0.0.1:${natsPort} with JetStream (store ${state}/nats)`);
    expect(first.stdout).toContain(`redis-server: starting on 127.0.0.1:${redisPort}`);

    // Started for good (detached), and found running by the next run.
    const again = await runUnprivileged(settings);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`nats-server: already answering on 127.0.0.1:${natsPort}`);
    expect(again.stdout).toContain(`redis-server: already answering on 127.0.0.1:${redisPort}`);
    const owner = async (pidFile: string) => {
      const pid = (await readFile(join(state, pidFile), 'utf8')).trim();
      return (await readFile(`/proc/${pid}/status`, 'utf8')).match(/^Uid:\s+(\d+)/m)![1];
    };
    const uid = String(asRoot ? NOBODY : process.getuid!());
    expect([await owner('nats/nats-server.pid'), await owner('redis/redis-server.pid')]).toEqual([uid, uid]);
  });

  // promtool comes with the prometheus package, wasm-ld with lld: the package is what the line names.
  it.each([
    ['clickhouse-server', 'clickhouse-server'],
    ['promtool', 'prometheus'],
    ['wasm-ld', 'lld'],
  ])('as an unprivileged user without sudo, names what is missing (%s: package %s) and the command to run as root, in one line', async (absent, pkg) => {
    // Every binary but one, as if its package were not installed.
    const bin = await directoryFor('sluice-services-bin-', false);
    cleanups.push(() => rm(bin, { recursive: true, force: true }));
    const binaries = {
      'nats-server': '/usr/sbin/nats-server',
      'redis-server': '/usr/bin/redis-server',
      'clickhouse-server': '/usr/sbin/clickhouse-server',
      'docker-compose': '/usr/bin/docker-compose',
      chromium: '/usr/bin/chromium',
      openssl: '/usr/bin/openssl',
      promtool: '/usr/bin/promtool',
      jq: '/usr/bin/jq',
      clang: '/usr/bin/clang',
      'wasm-ld': '/usr/bin/wasm-ld',
    };
    for (const [name, path] of Object.entries(binaries)) if (name !== absent) await symlink(path, join(bin, name));
    const outcome = await runUnprivileged({ SERVICES_PATH: bin, SERVICES_NATS_PORT: '1', SERVICES_REDIS_PORT: '1' });
    expect(outcome.code).toBe(1);
    expect(outcome.stdout).toBe('');
    expect(outcome.stderr).toBe(`services: FAILED: not installed: ${pkg}; install them as root with: sudo bash deploy/services.sh\n`);
  });
});
