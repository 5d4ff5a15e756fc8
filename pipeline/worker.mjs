// Entry point of a pipeline worker thread: loads the TypeScript sources through tsx, as
// bin/sluice.mjs does for the main thread.
import { register } from 'tsx/esm/api';

register();
const { runTask } = await import('./tasks.ts');

export default runTask;

/** Named task used by the pool to start each thread ahead of traffic. */
export function warm() {
  return true;
}
