import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../core/log.ts';
import { LocalStateStore } from '../state/local.ts';
import { LocalDeliveryQueue } from './local-queue.ts';
import { describeDeliveryQueue } from './queue.suite.ts';

describeDeliveryQueue('local journal', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-queue-'));
  const log = createLogger('silent');
  return {
    async open() {
      const state = new LocalStateStore(dir);
      await state.start();
      const queue = new LocalDeliveryQueue(state, log);
      await queue.start();
      // A process killed: its journal stays as the last fdatasync left it; the hung attempt never settles.
      return { queue, kill: () => state.shutdown() };
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});
