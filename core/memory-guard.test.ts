/**
 * The memory guard on a resident set the test sets: refusals from the high-water mark (503 +
 * Retry-After, counted), cleared only a step below it, storage work held meanwhile, readiness
 * saying so; and the in-flight budget refusing while the guard does.
 */
import { describe, expect, it } from 'vitest';
import { ByteBudget } from './byte-budget.ts';
import { SluiceError } from './errors.ts';
import { MemoryGuard } from './memory-guard.ts';

const MiB = 1024 * 1024;

function guardAt(rss: { now: number }, clock = { now: 0 }) {
  return new MemoryGuard({ budgetBytes: 768 * MiB, retryAfterSeconds: 5, rss: () => rss.now, now: () => clock.now, collectGarbage: false });
}

describe('MemoryGuard', () => {
  it('refuses from its high-water mark below the budget, with 503 and Retry-After, until the resident set is a step below it', () => {
    const rss = { now: 500 * MiB };
    const guard = guardAt(rss);
    // An eighth of the budget is kept for the work under way.
    expect(guard.highWaterBytes).toBe(672 * MiB);
    expect(guard.refusal()).toBeUndefined();
    expect(guard.hasRoom()).toBe(true);

    rss.now = 672 * MiB;
    expect(guard.hasRoom()).toBe(false); // read afresh
    const refused = guard.refusal()!;
    expect(refused).toBeInstanceOf(SluiceError);
    expect([refused.code, refused.httpStatus, refused.retryAfterSeconds]).toEqual(['unavailable', 503, 5]);
    expect(refused.message).toBe('the process is at its memory budget (SLUICE_MEMORY_BUDGET_MB: 672 MiB resident of 768 MiB): try again later');

    // Just under the mark is not enough: it clears half the headroom below it.
    rss.now = 660 * MiB;
    expect(guard.hasRoom()).toBe(false);
    rss.now = 623 * MiB;
    expect(guard.hasRoom()).toBe(true);
    expect(guard.refusal()).toBeUndefined();
    expect(guard.figures).toMatchObject({ rssBytes: 623 * MiB, peakRssBytes: 672 * MiB, budgetBytes: 768 * MiB, highWaterBytes: 672 * MiB, refusals: 1, insertWaits: 2 });
  });

  it('reports itself ready, saying while and shortly after it refuses that it is at the budget', () => {
    const rss = { now: 700 * MiB };
    const clock = { now: 1_000 };
    const guard = guardAt(rss, clock);
    expect(guard.status()).toMatchObject({ ok: true, detail: expect.stringMatching(/^at the memory budget \(700 MiB resident of 768 MiB\): ingestion is refused with 503/) });
    guard.refusal();
    rss.now = 400 * MiB;
    guard.hasRoom();
    clock.now += 5_000;
    expect(guard.status().detail).toMatch(/^at the memory budget/);
    clock.now += 10_000;
    expect(guard.status()).toEqual({ ok: true, figures: expect.objectContaining({ rssBytes: 400 * MiB, refusals: 1 }) });
  });

  it('keeps a 32 MiB headroom at least under a small budget', () => {
    const guard = new MemoryGuard({ budgetBytes: 200 * MiB, retryAfterSeconds: 1, rss: () => 0, collectGarbage: false });
    expect(guard.highWaterBytes).toBe(168 * MiB);
  });
});

describe('ByteBudget under a memory guard', () => {
  it('takes no new request and lets none grow while the process is at its budget; shrinking and releasing still work', () => {
    const rss = { now: 500 * MiB };
    const guard = guardAt(rss);
    let inflightRefusals = 0;
    const budget = new ByteBudget({ limitBytes: 64 * MiB, retryAfterSeconds: 5, onRefusal: () => inflightRefusals++, memory: guard });
    const held = budget.reserve(MiB);
    rss.now = 700 * MiB;
    guard.hasRoom();
    expect(() => budget.reserve(0)).toThrow(/at its memory budget/);
    expect(() => held.resize(2 * MiB)).toThrow(expect.objectContaining({ code: 'unavailable', retryAfterSeconds: 5 }));
    held.resize(MiB / 2);
    held.release();
    expect(budget.figures).toEqual({ inUseBytes: 0, limitBytes: 64 * MiB, refusals: 0 });
    // Counted as the guard's refusals, not the in-flight budget's.
    expect(inflightRefusals).toBe(0);
    expect(guard.figures.refusals).toBe(2);
    rss.now = 300 * MiB;
    guard.hasRoom();
    budget.reserve(MiB).release();
  });
});
