/**
 * Readiness: every long-lived component (storage, bus, state watches, consumer loops, worker
 * pool, descriptors) registers a probe that says whether it can do its work now. GET
 * /api/v1/ready answers 200 when every probe is ok and 503 naming the ones that are not;
 * /api/v1/health stays the spec's constant liveness answer.
 */
import { withinDeadline } from './deadline.ts';

/** What one component says about itself. */
export interface ComponentStatus {
  ok: boolean;
  /** One line for an operator: why it is not ok, or a warning worth seeing while ok. */
  detail?: string;
  /** Figures worth showing beside the state (restarts, values skipped...). */
  figures?: Record<string, number>;
}

export type StatusProbe = () => ComponentStatus | Promise<ComponentStatus>;

export interface ReadinessReport {
  ready: boolean;
  components: Record<string, ComponentStatus>;
}

/** A probe that does not answer within this time counts as not ok: readiness must not hang. */
const PROBE_TIMEOUT_MS = 2000;

export class Readiness {
  private readonly probes = new Map<string, StatusProbe>();

  /** Adds (or replaces) the probe of a component; names are dotted paths like `consumer.otel_traces`. */
  register(name: string, probe: StatusProbe): void {
    this.probes.set(name, probe);
  }

  unregister(name: string): void {
    this.probes.delete(name);
  }

  async report(): Promise<ReadinessReport> {
    const entries = await Promise.all(
      [...this.probes].map(async ([name, probe]) => [name, await runProbe(probe)] as const),
    );
    const components = Object.fromEntries(entries.sort(([a], [b]) => a.localeCompare(b)));
    return { ready: entries.every(([, status]) => status.ok), components };
  }
}

async function runProbe(probe: StatusProbe): Promise<ComponentStatus> {
  try {
    return await withinDeadline(Promise.resolve().then(probe), PROBE_TIMEOUT_MS, () => ({ ok: false, detail: `did not answer within ${PROBE_TIMEOUT_MS} ms` }));
  } catch (err) {
    return { ok: false, detail: (err as Error).message };
  }
}
