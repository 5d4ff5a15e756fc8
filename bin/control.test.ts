/**
 * The control socket is born private: checked with the process umask at 0 and the chmod after
 * listen() taken out, so only the way the socket is created can make it pass.
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Admin } from './admin.ts';
import { ControlServer, controlSocketAlive, controlSocketPath } from './control.ts';

const chmods = vi.hoisted(() => ({ skip: false }));
vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  return { ...fs, chmod: (...args: Parameters<typeof fs.chmod>) => (chmods.skip ? Promise.resolve() : fs.chmod(...args)) };
});

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sluice-control-'));
});
afterAll(() => rm(dataDir, { recursive: true, force: true }));

/** Starts a control server with the process umask at 0; returns the socket's mode and the umask start() left. */
async function startUnderUmask0(): Promise<{ mode: number; umaskAfter: number }> {
  const server = new ControlServer(dataDir, {} as Admin);
  const umask = process.umask(0);
  let umaskAfter: number;
  try {
    await server.start();
  } finally {
    umaskAfter = process.umask(umask);
  }
  try {
    expect(await controlSocketAlive(controlSocketPath(dataDir))).toBe(true);
    return { mode: (await stat(controlSocketPath(dataDir))).mode & 0o777, umaskAfter };
  } finally {
    await server.shutdown();
  }
}

describe('ControlServer', () => {
  it('creates its socket closed to group and others, without relying on a chmod', async () => {
    chmods.skip = true;
    try {
      expect((await startUnderUmask0()).mode & 0o077).toBe(0);
    } finally {
      chmods.skip = false;
    }
  });

  it('leaves the socket at mode 0600 and the process umask as it found it', async () => {
    const { mode, umaskAfter } = await startUnderUmask0();
    expect(mode.toString(8)).toBe('600');
    expect(umaskAfter).toBe(0);
  });
});
