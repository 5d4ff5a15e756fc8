/**
 * Where a message is rendered (render.ts): on the event loop when its input is small, since a
 * round trip to a worker thread costs more than such a render; on the render pool's threads
 * otherwise, so a large one never stalls the loop. Deliveries, the admin's previews and the
 * sanitising of a notification's body all go through it.
 */
import { validationFailed } from './errors.ts';
import { inputChars, renderMessage, type RenderRequest, type RenderResult } from './render.ts';
import { sanitizedBody, type SanitizedBody } from './sanitize.ts';

/**
 * Input characters (template or a notification's own text, and data) rendered on the event loop.
 * Such a render took 0.04-0.4 ms once its template's text was cached, and 2-6 ms the first time
 * (html-to-text on 8 KiB of HTML); a round trip to the pool took 0.2 ms (2-core machine).
 */
export const RENDER_ON_LOOP_MAX_CHARS = 8 * 1024;

/** Renders and sanitises on other threads (render-pool.ts). */
export interface RenderRunner {
  run(request: RenderRequest): Promise<RenderResult>;
  sanitize(html: string): Promise<SanitizedBody>;
}

/** Renders, and sanitises a notification's body, on the event loop or on the pool, by the size of the input. */
export class MessageRenderer {
  constructor(private readonly pool: RenderRunner, private readonly onLoopMaxChars = RENDER_ON_LOOP_MAX_CHARS) {}

  async render(request: RenderRequest): Promise<RenderResult> {
    return inputChars(request) <= this.onLoopMaxChars ? renderMessage(request) : this.pool.run(request);
  }

  /**
   * A notification's HTML body sanitised (sanitize.ts), 400 naming `body` when refused. Large
   * ones on the pool: sanitize-html took 50-160 ms for 100 KB of tags, twice over until settled.
   */
  async sanitizeBody(html: string): Promise<string> {
    const result = html.length <= this.onLoopMaxChars ? sanitizedBody(html) : await this.pool.sanitize(html);
    if (!result.ok) throw validationFailed('body', result.problem);
    return result.body;
  }
}
