/**
 * One process owns a data dir at a time (libchdb binds one data dir per process, and the local
 * state store has a single writer). The owner holds <dataDir>/sluice.pid; a pid file left by
 * a dead process is taken over.
 *
 * The data dir holds secrets (relay-master.key, key hashes, sealed install keys, the control
 * socket): it is created 0700, and one readable by others is named in a warning, not changed
 * behind the operator's back.
 */
import { mkdir, open, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../core/log.ts';

export class DataDirLockedError extends Error {
  constructor(readonly pid: number, dataDir: string) {
    super(`data dir ${dataDir} is in use by process ${pid}`);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Creates the data dir private (0700), or warns when an existing one is open to group or others. */
async function ensurePrivateDir(dir: string, log?: Pick<Logger, 'warn'>): Promise<void> {
  const created = await mkdir(dir, { recursive: true, mode: 0o700 });
  // mkdir's mode passes through the umask, which could only narrow it; parents it made get it too.
  if (created !== undefined) return;
  const mode = (await stat(dir)).mode & 0o777;
  if (mode & 0o077) {
    log?.warn({ dataDir: dir, mode: mode.toString(8) }, `the data dir is open to other users and holds secrets: run chmod 700 ${dir}`);
  }
}

/** Takes the data dir (creating it private); returns a function that releases it. */
export async function lockDataDir(dataDir: string, log?: Pick<Logger, 'warn'>): Promise<() => Promise<void>> {
  await ensurePrivateDir(dataDir, log);
  const file = join(dataDir, 'sluice.pid');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(file, 'wx', 0o600);
      await handle.writeFile(String(process.pid));
      await handle.close();
      return () => rm(file, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number((await readFile(file, 'utf8').catch(() => '')).trim());
      if (pid && pid !== process.pid && alive(pid)) throw new DataDirLockedError(pid, dataDir);
      await rm(file, { force: true }); // stale: its owner is gone
    }
  }
  throw new Error(`cannot lock data dir ${dataDir}`);
}
