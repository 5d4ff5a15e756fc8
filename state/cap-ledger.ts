/**
 * Caps that hold across every process sharing the state store (API keys per source, sources per
 * tenant). Counting the members and then creating one more races: two gateways both count 19 of
 * 20 and both create. So each capped scope has one ledger record of the places taken under its
 * cap, and a place is taken by compare-and-set on that record: of two takers that read the same
 * ledger one wins, the other reads it again and counts the winner.
 *
 * The ledger is the cap's count, not the truth about members, which stay in their own records.
 * A member that ends is not taken off by its owner: a place with a deadline (`until`) frees
 * itself then, and a ledger found full is rebuilt from the members the store holds (`members`),
 * so a revoked key's place is free for the next claim. A place taken less than a minute ago
 * whose member the store does not show yet (written just after the claim, or read from a replica
 * that lags) is kept: the rebuild can count too many for a moment, never too few.
 */
import { recordOf } from './shape.ts';
import type { StateStore } from './store.ts';

const LEDGERS = 'cap_ledgers';
/** How long a place is kept without its member in the store (see above). */
export const UNSEEN_PLACE_GRACE_MS = 60_000;

/** One place under a cap: when it was taken, and until when it holds (none: until the member ends). */
export interface CapPlace {
  at: number;
  until?: number;
}

interface Ledger {
  places: Record<string, CapPlace>;
}

const isLedger = recordOf<Ledger>({ places: 'object' });

/** A member as the store holds it: ended (revoked, expired), or holding until `until` if it has one. */
export interface MemberState {
  ended: boolean;
  until?: number;
}

export interface ClaimOptions {
  cap: number;
  /** The members of the scope the store holds, by id. */
  members: () => Promise<Map<string, MemberState>>;
  /** The place's deadline (ms since the epoch); none: it holds until the member ends. */
  until?: number;
  /** A member not counted: the one this claim replaces (a key being rotated out). */
  except?: string;
  /** The error to throw past the cap. */
  refuse: (cap: number) => Error;
}

export class CapLedger {
  constructor(private readonly store: StateStore, private readonly now: () => number = Date.now) {}

  /** Takes a place for `id` in `scope`, or throws `refuse(cap)` when every place is taken. */
  async claim(scope: string, id: string, options: ClaimOptions): Promise<void> {
    for (;;) {
      const stored = await this.store.getVersioned<unknown>(LEDGERS, scope);
      const now = this.now();
      // A scope without a ledger (made before caps, or its record unreadable) starts from its members.
      let places = stored && isLedger(stored.value) ? current(stored.value.places, now) : await rebuilt({}, options.members, now);
      if (held(places, options.except) >= options.cap && stored && isLedger(stored.value)) places = await rebuilt(places, options.members, now);
      if (held(places, options.except) >= options.cap) throw options.refuse(options.cap);
      places[id] = { at: now, ...(options.until === undefined ? {} : { until: options.until }) };
      const next: Ledger = { places };
      const revision = stored
        ? await this.store.update(LEDGERS, scope, next, stored.revision)
        : await this.store.create(LEDGERS, scope, next);
      if (revision !== undefined) return;
    }
  }

  /**
   * Makes `id`'s place hold until its member ends (its deadline dropped): false, and nothing
   * changed, if the scope holds no place for it or the place's deadline has passed.
   */
  async settle(scope: string, id: string): Promise<boolean> {
    for (;;) {
      const stored = await this.store.getVersioned<unknown>(LEDGERS, scope);
      if (!stored || !isLedger(stored.value)) return false;
      const places = current(stored.value.places, this.now());
      const place = places[id];
      if (!place) return false;
      if (place.until === undefined) return true;
      places[id] = { at: place.at };
      if ((await this.store.update<Ledger>(LEDGERS, scope, { places }, stored.revision)) !== undefined) return true;
    }
  }
}

/** The places still holding at `now` (a copy). */
function current(places: Record<string, CapPlace>, now: number): Record<string, CapPlace> {
  const kept: Record<string, CapPlace> = {};
  for (const [id, place] of Object.entries(places)) {
    if (typeof place?.at !== 'number') continue;
    if (place.until === undefined || (typeof place.until === 'number' && place.until > now)) kept[id] = place;
  }
  return kept;
}

function held(places: Record<string, CapPlace>, except: string | undefined): number {
  return Object.keys(places).filter((id) => id !== except).length;
}

/** The places of the store's live members, plus the recent places whose member it does not show yet. */
async function rebuilt(
  places: Record<string, CapPlace>,
  members: () => Promise<Map<string, MemberState>>,
  now: number,
): Promise<Record<string, CapPlace>> {
  const known = await members();
  const next: Record<string, CapPlace> = {};
  for (const [id, { ended, until }] of known) {
    if (ended || (until !== undefined && until <= now)) continue;
    const place = places[id];
    // A place settled in the ledger keeps holding while its member's record catches up.
    const settled = place !== undefined && place.until === undefined;
    next[id] = { at: place?.at ?? now, ...(until === undefined || settled ? {} : { until }) };
  }
  for (const [id, place] of Object.entries(places)) {
    if (!known.has(id) && now - place.at < UNSEEN_PLACE_GRACE_MS) next[id] = place;
  }
  return next;
}
