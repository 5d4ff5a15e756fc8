/**
 * One process owns a data dir at a time (libchdb binds one data dir per process, and the local
 * state store has a single writer). The owner holds <dataDir>/sluice.pid; a pid file left by
 * a dead process is taken over.
 */
import { mkdir, open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';

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

/** Takes the data dir; returns a function that releases it. */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  await mkdir(dataDir, { recursive: true });
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
