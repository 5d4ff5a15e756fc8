import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../core/log.ts';
import { LocalDeliveryQueue } from './local-queue.ts';
import { AMPLE_SHARES, describeDeliveryQueue } from './queue.suite.ts';

describeDeliveryQueue('local log', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-queue-'));
  const log = createLogger('silent');
  return {
    async open(settings = {}) {
      const queue = new LocalDeliveryQueue({
        dir, maxBytes: settings.maxBytes ?? 64 * 1024 * 1024, maxJobs: 100_000, timeoutMs: 5000, retryAfterSeconds: 2, shares: settings.shares ?? AMPLE_SHARES, log,
      });
      await queue.start();
      // A process killed: its log stays as the last fdatasync left it; the hung attempt never settles.
      return { queue, kill: async () => {} };
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});
