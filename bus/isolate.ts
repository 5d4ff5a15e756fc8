/**
 * Poison isolation, shared by the embedded group commit and the JetStream consumer: units
 * (requests, messages) are stored together, and when storage refuses the rows themselves the
 * group is split in halves until each refused unit stands alone. One poison unit costs
 * O(log n) extra inserts and never fails the others; a storage outage fails the remaining
 * units as they are (retrying a split batch against a dead server helps nobody).
 */
import { isDataError } from '../storage/errors.ts';

/** Per unit, in order: undefined when stored, else the error that refused it. */
export type Outcomes = Array<unknown | undefined>;

export async function storeIsolating<U>(
  units: readonly U[],
  store: (group: readonly U[]) => Promise<void>,
  splittable: (err: unknown) => boolean = isDataError,
  /**
   * Told of the first refusal that splits the batch, with the units refused together: a refusal
   * is worth a log line even when every unit is stored in the end, split.
   */
  onSplit?: (err: unknown, units: number) => void,
): Promise<Outcomes> {
  const outcomes: Outcomes = new Array(units.length).fill(undefined);
  let outage: unknown;
  let split = false;
  const attempt = async (from: number, to: number): Promise<void> => {
    if (outage !== undefined) {
      outcomes.fill(outage, from, to);
      return;
    }
    try {
      await store(units.slice(from, to));
    } catch (err) {
      if (!splittable(err)) {
        outage = err; // found while splitting, it fails what is left too
        outcomes.fill(err, from, to);
      } else if (to - from === 1) {
        outcomes[from] = err;
      } else {
        if (!split) onSplit?.(err, to - from);
        split = true;
        const middle = (from + to) >>> 1;
        await attempt(from, middle);
        await attempt(middle, to);
      }
    }
  };
  if (units.length > 0) await attempt(0, units.length);
  return outcomes;
}
