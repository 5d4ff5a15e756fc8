/** A chDB engine of a test's own (one per test file: chDB binds one data dir per process). */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChdbReadThreads } from '../storage/chdb-read-threads.ts';
import { chdbEngineDir, ChdbStorage } from '../storage/chdb.ts';

export interface TestEngine {
  dataDir: string;
  /** The writer, with the otel schema. */
  storage: ChdbStorage;
  /** Read connections, as the query endpoint has them: on the process's read threads. */
  reader: ChdbReadThreads;
  close(): Promise<void>;
}

export async function openTestEngine(): Promise<TestEngine> {
  const dataDir = await mkdtemp(join(tmpdir(), 'sluice-engine-'));
  const storage = new ChdbStorage(dataDir, 'otel');
  await storage.start();
  const reader = new ChdbReadThreads(chdbEngineDir(dataDir), 2);
  await reader.start();
  return {
    dataDir,
    storage,
    reader,
    async close() {
      await reader.shutdown();
      await storage.shutdown();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
