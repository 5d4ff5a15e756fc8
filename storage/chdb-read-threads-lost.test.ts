/**
 * A chDB read thread that ends takes the engine with it (chdb-read-threads.ts): the process
 * must then end at once, saying why, rather than hang on its next statement. Run in a child
 * process of its own, since the engine is the process's.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, expect, it } from 'vitest';

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

const script = (engineDir: string) => `
import { ChdbReadThreads } from ${JSON.stringify(fileURLToPath(new URL('./chdb-read-threads.ts', import.meta.url)))};
const reader = new ChdbReadThreads(${JSON.stringify(engineDir)}, 2);
await reader.start();
const { threadId } = await reader.run('system', 'SELECT 1', { format: 'TSV' });
process.stdout.write('started ' + threadId + '\\n');
// What a crash of the thread does: it ends (the pool is the reader's own, reached past its privacy).
await reader.pool.threads[0].terminate();
setInterval(() => {}, 1000);
`;

it('ends the process with the reason when a read thread ends', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-read-lost-'));
  dirs.push(dir);
  const file = join(dir, 'lose-a-thread.mts');
  await writeFile(file, script(join(dir, 'chdb')));
  const child = spawn(process.execPath, ['--import', 'tsx', file]);
  let stderr = '';
  let stdout = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  child.stdout.on('data', (chunk) => (stdout += chunk));
  // A process that hangs instead (the engine gone, nothing said) is killed at the deadline. One
  // that exits may be ended by a signal on the way out (chDB's engine, half gone, crashes at exit:
  // SIGSEGV here), which is as good for a supervisor as an exit code.
  const deadline = setTimeout(() => child.kill('SIGKILL'), 40_000);
  const ended = await new Promise<string>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? `exit ${code}`)));
  clearTimeout(deadline);
  expect(stdout).toMatch(/^started \d+/);
  expect(ended).not.toBe('SIGKILL');
  expect(ended).not.toBe('exit 0');
  expect(stderr).toContain('a chDB read thread ended, which takes the embedded engine with it');
}, 60_000);
