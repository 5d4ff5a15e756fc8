/**
 * File descriptors: every connection, socket and open file takes one, and a process that runs
 * out can accept nothing and open nothing (storage, the control socket). Readiness turns red
 * before the limit, while there is room left to report it. Linux only (/proc); elsewhere the
 * probe says it cannot tell and stays ok.
 */
import { readdir, readFile } from 'node:fs/promises';
import type { ComponentStatus } from './readiness.ts';

/** Share of the soft limit in use past which the process is not ready. */
const NOT_READY_SHARE = 0.9;

export interface DescriptorUse {
  open: number;
  limit: number;
}

/** Descriptors open in this process and its soft limit, or undefined where /proc cannot tell. */
export async function descriptorUse(): Promise<DescriptorUse | undefined> {
  try {
    const [entries, limits] = await Promise.all([readdir('/proc/self/fd'), readFile('/proc/self/limits', 'utf8')]);
    const soft = /^Max open files\s+(\d+|unlimited)/m.exec(limits)?.[1];
    if (!soft) return undefined;
    return { open: entries.length, limit: soft === 'unlimited' ? Infinity : Number(soft) };
  } catch {
    return undefined;
  }
}

export async function descriptorStatus(use: Promise<DescriptorUse | undefined> = descriptorUse()): Promise<ComponentStatus> {
  const figures = await use;
  if (!figures) return { ok: true, detail: 'descriptor use unknown on this platform' };
  const { open, limit } = figures;
  const reported = { open, limit: Number.isFinite(limit) ? limit : -1 };
  if (open >= limit * NOT_READY_SHARE) {
    return { ok: false, detail: `${open} of ${limit} file descriptors in use: raise the limit (ulimit -n) or shed connections`, figures: reported };
  }
  return { ok: true, figures: reported };
}
