/**
 * The memory guard on a resident set the test sets: inserts held from its storage mark, requests
 * refused from its high-water mark (503 + Retry-After, counted) until a step below it, readiness
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
  it('holds inserts from its storage mark, refuses requests from its high-water mark with 503 and Retry-After, until a step below it', () => {
    const rss = { now: 500 * MiB };
    const guard = guardAt(rss);
    // 768 MiB: inserts wait from 640, requests are refused from 720 until under 704.
    expect([guard.storageMarkBytes, guard.highWaterBytes]).toEqual([640 * MiB, 720 * MiB]);
    expect(guard.refusal()).toBeUndefined();
    expect(guard.hasRoom()).toBe(true);

    rss.now = 640 * MiB;
    expect(guard.hasRoom()).toBe(false); // read afresh
    expect(guard.refusal()).toBeUndefined(); // ingestion goes on into the log

    rss.now = 720 * MiB;
    guard.hasRoom();
    const refused = guard.refusal()!;
    expect(refused).toBeInstanceOf(SluiceError);
    expect([refused.code, refused.httpStatus, refused.retryAfterSeconds]).toEqual(['unavailable', 503, 5]);
    expect(refused.message).toBe('the process is at its memory budget (SLUICE_MEMORY_BUDGET_MB: 720 MiB resident of 768 MiB): try again later');

    // Just under the mark is not enough: it clears a step below it.
    rss.now = 710 * MiB;
    guard.hasRoom();
    expect(guard.refusal()).toBeDefined();
    rss.now = 703 * MiB;
    expect(guard.hasRoom()).toBe(false); // still over the storage mark
    expect(guard.refusal()).toBeUndefined();
    rss.now = 639 * MiB;
    expect(guard.hasRoom()).toBe(true);
    expect(guard.figures).toMatchObject({ rssBytes: 639 * MiB, peakRssBytes: 720 * MiB, budgetBytes: 768 * MiB, highWaterBytes: 720 * MiB, storageMarkBytes: 640 * MiB, refusals: 2, insertWaits: 4 });
  });

  it('reports itself ready, saying while it holds inserts, and while and shortly after it refuses, that it is at the budget', () => {
    const rss = { now: 650 * MiB };
    const clock = { now: 1_000 };
    const guard = guardAt(rss, clock);
    expect(guard.status()).toMatchObject({ ok: true, detail: 'near the memory budget (650 MiB resident of 768 MiB): inserts into storage wait until it is under 640 MiB' });
    rss.now = 730 * MiB;
    guard.hasRoom();
    expect(guard.status()).toMatchObject({ ok: true, detail: expect.stringMatching(/^at the memory budget \(730 MiB resident of 768 MiB\): ingestion is refused with 503 until it is under 704 MiB/) });
    guard.refusal();
    rss.now = 400 * MiB;
    guard.hasRoom();
    clock.now += 5_000;
    expect(guard.status().detail).toMatch(/^at the memory budget/);
    clock.now += 10_000;
    expect(guard.status()).toEqual({ ok: true, figures: expect.objectContaining({ rssBytes: 400 * MiB, refusals: 1 }) });
  });

  it('reads the resident set when asked, at most every 50 ms, and not while nobody asks', async () => {
    let reads = 0;
    const rss = { now: 500 * MiB };
    const clock = { now: 1_000 };
    const guard = new MemoryGuard({ budgetBytes: 768 * MiB, retryAfterSeconds: 5, rss: () => (reads++, rss.now), now: () => clock.now, collectGarbage: false });
    reads = 0;
    // Idle: no timer reads it (a wake-up of the process each time).
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(reads).toBe(0);
    // A burst of admissions within one read's life costs one read.
    clock.now += 50;
    rss.now = 730 * MiB;
    for (let i = 0; i < 1000; i++) guard.refusal();
    expect(reads).toBe(1);
    expect(guard.figures.refusals).toBe(1000);
    // The next question after 50 ms reads again: the guard notices memory falling back.
    rss.now = 400 * MiB;
    clock.now += 49;
    expect(guard.refusal()).toBeDefined();
    clock.now += 1;
    expect(guard.refusal()).toBeUndefined();
    expect(reads).toBe(2);
    // Readiness and the metrics ask too.
    rss.now = 650 * MiB;
    clock.now += 50;
    expect(guard.status().detail).toMatch(/the memory budget \(650 MiB resident/);
    expect(reads).toBe(3);
  });

  it('keeps 16 MiB over its high-water mark and 32 over its storage mark at least, under a small budget', () => {
    const guard = new MemoryGuard({ budgetBytes: 180 * MiB, retryAfterSeconds: 1, rss: () => 0, collectGarbage: false });
    expect([guard.storageMarkBytes, guard.highWaterBytes]).toEqual([148 * MiB, 164 * MiB]);
  });
});

describe('ByteBudget under a memory guard', () => {
  it('takes no new request and lets none grow while the process is at its budget; shrinking and releasing still work', () => {
    const rss = { now: 500 * MiB };
    const guard = guardAt(rss);
    let inflightRefusals = 0;
    const budget = new ByteBudget({ limitBytes: 64 * MiB, retryAfterSeconds: 5, onRefusal: () => inflightRefusals++, memory: guard });
    const held = budget.reserve(MiB);
    rss.now = 720 * MiB;
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
