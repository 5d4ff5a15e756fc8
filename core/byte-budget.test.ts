import { describe, expect, it } from 'vitest';
import { ByteBudget } from './byte-budget.ts';

const budget = (limitBytes = 100, now = () => 0) => {
  let refusals = 0;
  const b = new ByteBudget({ limitBytes, retryAfterSeconds: 7, onRefusal: () => refusals++, now });
  return { b, refusals: () => refusals };
};

describe('ByteBudget', () => {
  it('reserves up to its limit and refuses past it with 503 + Retry-After', () => {
    const { b, refusals } = budget();
    const first = b.reserve(60);
    expect(() => b.reserve(41)).toThrow(expect.objectContaining({ code: 'unavailable', retryAfterSeconds: 7 }));
    expect(refusals()).toBe(1);
    const second = b.reserve(40);
    expect(b.figures).toEqual({ inUseBytes: 100, limitBytes: 100, refusals: 1 });
    first.release();
    second.release();
    expect(b.figures.inUseBytes).toBe(0);
  });

  it('takes no new work when full, not even a body of unknown length', () => {
    const { b } = budget();
    b.reserve(100);
    expect(() => b.reserve(0)).toThrow(expect.objectContaining({ code: 'unavailable' }));
  });

  it('refuses what could never fit as too large, not as "retry later"', () => {
    const { b, refusals } = budget();
    expect(() => b.reserve(101)).toThrow(expect.objectContaining({ code: 'payload_too_large' }));
    expect(refusals()).toBe(0);
  });

  it('grows and shrinks a reservation; a refused growth leaves it as it was', () => {
    const { b } = budget();
    const body = b.reserve(10);
    const other = b.reserve(50);
    body.resize(40); // a chunked body arriving
    expect(b.figures.inUseBytes).toBe(90);
    expect(() => body.resize(60)).toThrow(expect.objectContaining({ code: 'unavailable' }));
    expect(body.bytes).toBe(40);
    body.resize(5); // the rows are smaller than the body
    expect(b.figures.inUseBytes).toBe(55);
    other.release();
    body.release();
    expect(b.figures.inUseBytes).toBe(0);
  });

  it('releases exactly once', () => {
    const { b } = budget();
    const r = b.reserve(30);
    r.release();
    r.release();
    expect(b.figures.inUseBytes).toBe(0);
    expect(() => r.resize(10)).toThrow('released');
  });

  it('splits off a part that outlives the request without refusing or double counting', () => {
    const { b } = budget();
    const request = b.reserve(100);
    const kept = request.split(70);
    expect([request.bytes, kept.bytes, b.figures.inUseBytes]).toEqual([30, 70, 100]);
    request.release();
    expect(b.figures.inUseBytes).toBe(70);
    kept.release();
    expect(b.figures.inUseBytes).toBe(0);
  });

  it('is always ok for readiness, and says "full" for a while after a refusal', () => {
    let clock = 0;
    const { b } = budget(100, () => clock);
    expect(b.status()).toEqual({ ok: true, figures: { inUseBytes: 0, limitBytes: 100, refusals: 0 } });
    const r = b.reserve(100);
    expect(() => b.reserve(1)).toThrow();
    expect(b.status()).toMatchObject({ ok: true, detail: expect.stringContaining('full'), figures: { inUseBytes: 100, refusals: 1 } });
    r.release();
    clock += 10_000;
    expect(b.status().detail).toBeUndefined();
  });
});
