// Entry point of a pipeline worker thread, bundled with what it imports into one JavaScript
// file when a pool starts (worker-bundle.ts).
export { runTask as default } from './tasks.ts';

/** Named task used by the pool to start each thread ahead of traffic. */
export function warm(): boolean {
  return true;
}
