/**
 * How many reads of storage for people run at once (the console's charts, the relay's listings
 * and searches): a few in all (each chDB statement holds a thread of libuv's pool, which the
 * local log's fdatasync and the engine's inserts need too), and a few per tenant, so one
 * tenant's dashboard of twenty charts, or a search repeated, waits its turn instead of holding
 * everyone else's. Past a tenant's queue the read is refused (429, come back in a second); past
 * the process's, 503.
 */
import { ConcurrencyGate } from './concurrency-gate.ts';
import { ApiError } from './errors.ts';

export interface ReadGateLimits {
  /** Reads running at once in the process, and waiting. */
  running: number;
  waiting: number;
  /** Reads one tenant has running (or waiting for the process's turn) at once, and waiting. */
  perTenant: number;
  perTenantWaiting: number;
}

export const DEFAULT_READ_LIMITS: ReadGateLimits = { running: 2, waiting: 100, perTenant: 2, perTenantWaiting: 24 };

export class ReadGate {
  private readonly all: ConcurrencyGate;
  private readonly tenants = new Map<string, ConcurrencyGate>();

  constructor(private readonly limits: ReadGateLimits = DEFAULT_READ_LIMITS) {
    this.all = new ConcurrencyGate(limits.running, limits.waiting, () => new ApiError(503, 'Storage is busy with other reads: try again in a moment', { retryAfterSeconds: 1 }));
  }

  async run<T>(tenantId: string, read: () => Promise<T>): Promise<T> {
    let gate = this.tenants.get(tenantId);
    if (!gate) {
      gate = new ConcurrencyGate(this.limits.perTenant, this.limits.perTenantWaiting, () =>
        new ApiError(429, 'Too many reads at once for this tenant: wait for the ones under way', { retryAfterSeconds: 1 }));
      this.tenants.set(tenantId, gate);
    }
    try {
      return await gate.run(() => this.all.run(read));
    } finally {
      // A tenant with nothing under way keeps no gate.
      if (gate.idle && this.tenants.get(tenantId) === gate) this.tenants.delete(tenantId);
    }
  }

  /** Tenants with reads under way (for tests and metrics). */
  get busyTenants(): number {
    return this.tenants.size;
  }
}
