/**
 * A deadline on another party's answer (Redis, a resolver, a readiness probe) that does not
 * count this process's own stalls against it.
 */

/** A timer this much later than asked measured our event loop, not the other party. */
const STALLED = 1.5;
/** However often the loop stalls, the answer is given up after this many deadlines in all. */
const AT_MOST = 10;

/**
 * `answer` if it settles within `ms` of time in which this event loop ran, else `late()` (a
 * value, or a throw to reject). A timer that fires well past its time saw a stall of ours (a
 * long GC, a synchronous insert) while the answer may be waiting unread in a socket: it is armed
 * again rather than blaming the other party, up to AT_MOST deadlines of wall time.
 */
export function withinDeadline<T, L>(answer: Promise<T>, ms: number, late: () => L): Promise<T | L> {
  return new Promise<T | L>((resolve, reject) => {
    const startedAt = performance.now();
    let timer: NodeJS.Timeout;
    const arm = () => {
      const armedAt = performance.now();
      timer = setTimeout(() => {
        const now = performance.now();
        if (now - armedAt > STALLED * ms && now - startedAt < AT_MOST * ms) return arm();
        try {
          resolve(late());
        } catch (err) {
          reject(err);
        }
      }, ms);
    };
    arm();
    answer.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}
