/**
 * A lease: which one of the processes sharing a state store does a job that must run once (the
 * alert evaluator). One record per lease, { holder, expiresAt }, taken and renewed only by
 * compare-and-set, so of two processes that read it at once one wins. A holder that stops
 * renewing (it died, or hangs) loses it once expiresAt passes, and the next to ask takes it.
 *
 * Expiry is read against each process's clock: clocks a few seconds apart shorten or stretch a
 * handover by as much, which is why a holder renews well before its ttl runs out and the work it
 * guards is safe to overlap briefly (compare-and-set writes, notifications with derived ids).
 */
import { recordOf } from '../state/shape.ts';
import type { StateStore } from '../state/store.ts';

const LEASES = 'leases';
/** Rounds of read-then-write lost to another process before tryHold gives up for this call. */
const MAX_RACES = 3;

interface LeaseRecord {
  holder: string;
  /** Epoch ms; at or past it the lease is free. */
  expiresAt: number;
}

const isLeaseRecord = recordOf<LeaseRecord>({ holder: 'string', expiresAt: 'number' });

export class Lease {
  /**
   * @param name what the lease guards (its key)
   * @param holder this process, unique among those sharing the store
   * @param ttlMs how long a take or renewal holds without another
   */
  constructor(
    private readonly state: StateStore,
    readonly name: string,
    readonly holder: string,
    readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Takes the lease if it is free, renews it if this holder has it: true while this holder has it. */
  async tryHold(): Promise<boolean> {
    for (let race = 0; race < MAX_RACES; race++) {
      const current = await this.state.getVersioned<unknown>(LEASES, this.name);
      const now = this.now();
      const mine: LeaseRecord = { holder: this.holder, expiresAt: now + this.ttlMs };
      if (!current) {
        if ((await this.state.create(LEASES, this.name, mine)) !== undefined) return true;
        continue;
      }
      // An unreadable record guards nothing: taken over like an expired one.
      const held = isLeaseRecord(current.value) && current.value.holder !== this.holder && current.value.expiresAt > now;
      if (held) return false;
      if ((await this.state.update(LEASES, this.name, mine, current.revision)) !== undefined) return true;
    }
    return false;
  }

  /** Gives the lease up now, if this holder has it, so the next to ask need not wait out the ttl. */
  async release(): Promise<void> {
    for (let race = 0; race < MAX_RACES; race++) {
      const current = await this.state.getVersioned<unknown>(LEASES, this.name);
      if (!current || !isLeaseRecord(current.value) || current.value.holder !== this.holder) return;
      if ((await this.state.update<LeaseRecord>(LEASES, this.name, { holder: this.holder, expiresAt: 0 }, current.revision)) !== undefined) return;
    }
  }
}
