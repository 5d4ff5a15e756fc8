// Entry point of a render worker thread, bundled with what it imports into one JavaScript file
// when the render pool starts (render-pool.ts).
export { renderMessage as default } from './render.ts';
/** Named task: a notification's body sanitised (sanitize.ts). */
export { sanitizedBody as sanitize } from './sanitize.ts';

/** Named task the pool runs to start each thread ahead of the first render. */
export function warm(): boolean {
  return true;
}
