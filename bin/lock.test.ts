import { chmod, mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../core/log.ts';
import { lockDataDir } from './lock.ts';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'sluice-lock-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

const modeOf = async (path: string) => (await stat(path)).mode & 0o777;

describe('lockDataDir', () => {
  it('creates a fresh data dir 0700, whatever the umask', async () => {
    const dataDir = join(root, 'fresh', 'data');
    const umask = process.umask(0);
    try {
      const release = await lockDataDir(dataDir);
      await release();
    } finally {
      process.umask(umask);
    }
    expect((await modeOf(dataDir)).toString(8)).toBe('700');
  });

  it('warns about an existing data dir others can read, naming the fix, and leaves its mode alone', async () => {
    const dataDir = join(root, 'shared');
    await mkdir(dataDir);
    await chmod(dataDir, 0o755);
    const lines: string[] = [];
    const release = await lockDataDir(dataDir, createLogger('info', { write: (line: string) => void lines.push(line) }));
    await release();
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, msg: expect.stringContaining(`chmod 700 ${dataDir}`) });
    expect((await modeOf(dataDir)).toString(8)).toBe('755');
  });

  it('says nothing about a private data dir', async () => {
    const lines: string[] = [];
    const release = await lockDataDir(join(root, 'fresh', 'data'), createLogger('info', { write: (line: string) => void lines.push(line) }));
    await release();
    expect(lines).toEqual([]);
  });
});
