/**
 * Where messages are rendered and notification bodies sanitised: small inputs on the event loop,
 * large ones on the render pool's threads (a real pool: the worker bundled from
 * relay/render-worker.ts), with the same result.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { renderMessage, type RenderRequest, type RenderResult } from './render.ts';
import { RenderPool } from './render-pool.ts';
import { MessageRenderer, RENDER_ON_LOOP_MAX_CHARS, type RenderRunner } from './renderer.ts';
import { MAX_NESTING, sanitizedBody, type SanitizedBody } from './sanitize.ts';
import { DEFAULT_TEMPLATE } from './templates.ts';

const small: RenderRequest = { template: DEFAULT_TEMPLATE, data: { name: 'Ada', message: 'Hello' } };
const large: RenderRequest = { template: DEFAULT_TEMPLATE, data: { name: 'Ada', message: '<'.repeat(RENDER_ON_LOOP_MAX_CHARS) } };

/** A pool that records what it is given and renders (or sanitises) it here. */
class RecordingPool implements RenderRunner {
  readonly requests: RenderRequest[] = [];
  readonly bodies: string[] = [];
  async run(request: RenderRequest): Promise<RenderResult> {
    this.requests.push(request);
    return renderMessage(request);
  }
  async sanitize(html: string): Promise<SanitizedBody> {
    this.bodies.push(html);
    return sanitizedBody(html);
  }
}

describe('MessageRenderer', () => {
  it('renders a small input on the event loop and a large one on the pool', async () => {
    const pool = new RecordingPool();
    const renderer = new MessageRenderer(pool);
    expect(await renderer.render(small)).toEqual(renderMessage(small));
    expect(pool.requests).toEqual([]);
    await renderer.render(large);
    expect(pool.requests).toEqual([large]);
  });

  it('counts a notification\'s own body, not the template it replaces', async () => {
    const pool = new RecordingPool();
    const renderer = new MessageRenderer(pool);
    const body = `<p>${'x'.repeat(RENDER_ON_LOOP_MAX_CHARS)}</p>`;
    await renderer.render({ template: { subject: 's', html: 'x'.repeat(RENDER_ON_LOOP_MAX_CHARS) }, data: {}, body: '<p>short</p>' });
    expect(pool.requests).toEqual([]);
    await renderer.render({ template: DEFAULT_TEMPLATE, data: {}, body });
    expect(pool.requests).toHaveLength(1);
  });
});

describe('MessageRenderer: a notification body', () => {
  it('sanitises a small body on the event loop and a large one on the pool; refuses either with 400 naming body', async () => {
    const pool = new RecordingPool();
    const renderer = new MessageRenderer(pool);
    expect(await renderer.sanitizeBody('<p onclick="x()">hi</p><script>alert(1)</script>')).toBe('<p>hi</p>');
    expect(pool.bodies).toEqual([]);
    const large = `<p>${'a'.repeat(RENDER_ON_LOOP_MAX_CHARS)}</p>`;
    expect(await renderer.sanitizeBody(large)).toBe(large);
    expect(pool.bodies).toEqual([large]);
    const nested = `${'<b>'.repeat(MAX_NESTING + 1)}x`;
    await expect(renderer.sanitizeBody(nested)).rejects.toMatchObject({ statusCode: 400, message: `Validation failed: body nests elements more than ${MAX_NESTING} deep` });
  });
});

describe('RenderPool', () => {
  const pool = new RenderPool();
  afterAll(() => pool.shutdown());

  it('is ready before its first use, renders on a thread as the event loop would, and refuses once stopped', async () => {
    expect(pool.status()).toMatchObject({ ok: true });
    expect(await new MessageRenderer(pool).render(large)).toEqual(renderMessage(large));
    expect(pool.status()).toMatchObject({ ok: true, figures: { threads: 1 } });
    const escaped = `<p>${'&lt;script&gt;x&lt;/script&gt;'.repeat(1000)}</p>`;
    expect(await pool.sanitize(escaped)).toEqual(sanitizedBody(escaped));
    await pool.shutdown();
    await expect(pool.run(small)).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('refuses a render past its queue with a retryable 503 rather than queue it, and renders the ones it took', async () => {
    const small = new RenderPool({ maxQueue: 2 });
    try {
      await small.start();
      const outcomes = await Promise.allSettled(Array.from({ length: 12 }, () => small.run(large)));
      const refused = outcomes.filter((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
      expect(refused.length).toBeGreaterThan(0);
      for (const { reason } of refused) expect(reason).toMatchObject({ code: 'unavailable', retryAfterSeconds: 1, message: 'the render pool is busy (2 renders waiting)' });
      for (const outcome of outcomes) if (outcome.status === 'fulfilled') expect(outcome.value).toEqual(renderMessage(large));
    } finally {
      await small.shutdown();
    }
  });
});
