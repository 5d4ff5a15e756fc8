/**
 * DeliveryShares: how many attempts one tenant and one destination may have under way at once in
 * a process. Caps, not weights: a destination that stalls (an SMTP server that greets and then
 * says nothing, a webhook that answers after its timeout) holds at most its destination's slots,
 * a tenant at most its tenant's, and the process's other slots go on delivering for everyone
 * else. Both queue drivers take a slot before an attempt and give it back when it settles.
 */
import type { DeliveryJob } from './job.ts';

export interface ShareLimits {
  /** Attempts at once for one tenant. */
  perTenant: number;
  /** Attempts at once to one destination (an address, a number, a webhook). */
  perDestination: number;
}

/** What a full share refused: the job waits for a slot of this kind. */
export type FullShare = { full: 'tenant' | 'destination'; key: string };

/** A slot held for one attempt; release it exactly once. */
export interface ShareSlot {
  release(): void;
}

type Job = Pick<DeliveryJob, 'tenantId' | 'channel' | 'destination'>;

/** The key of a job's tenant share. */
export function tenantShareKey(job: Job): string {
  return `tenant ${job.tenantId}`;
}

/** The key of a job's destination share. */
export function destinationShareKey(job: Job): string {
  return `${job.channel} ${job.destination}`;
}

export class DeliveryShares {
  private readonly held = new Map<string, number>();

  constructor(readonly limits: ShareLimits) {}

  /** A slot for the job's tenant and destination, or which of the two is full (nothing is taken then). */
  take(job: Job): ShareSlot | FullShare {
    const tenant = tenantShareKey(job);
    const destination = destinationShareKey(job);
    if (this.count(destination) >= this.limits.perDestination) return { full: 'destination', key: destination };
    if (this.count(tenant) >= this.limits.perTenant) return { full: 'tenant', key: tenant };
    this.add(tenant, 1);
    this.add(destination, 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.add(tenant, -1);
        this.add(destination, -1);
      },
    };
  }

  /** Slots held under `key` (a tenant's or a destination's). */
  count(key: string): number {
    return this.held.get(key) ?? 0;
  }

  private add(key: string, delta: number): void {
    const next = this.count(key) + delta;
    if (next === 0) this.held.delete(key);
    else this.held.set(key, next);
  }
}

/** Whether take() refused. */
export function isFull(taken: ShareSlot | FullShare): taken is FullShare {
  return 'full' in taken;
}
