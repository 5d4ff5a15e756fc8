/**
 * Saved dashboards, one bucket in the state store; each belongs to a tenant and is found only
 * through it (another tenant's id is "not found"). Changes are compare-and-set, so two people
 * saving the same dashboard at once both land one after the other, never half of each.
 */
import { randomBytes } from 'node:crypto';
import { ApiError } from '../core/errors.ts';
import type { StateStore } from '../state/store.ts';
import type { ChartSpec, Dashboard } from './api.ts';

const DASHBOARDS = 'console_dashboards';
/** A tenant's dashboards; past it, creating one answers 409. */
export const MAX_DASHBOARDS_PER_TENANT = 200;

interface StoredDashboard extends Dashboard {
  tenantId: string;
}

const view = ({ tenantId: _tenant, ...dashboard }: StoredDashboard): Dashboard => dashboard;
const notFound = () => new ApiError(404, 'Dashboard not found');

export class Dashboards {
  constructor(private readonly state: StateStore) {}

  async list(tenantId: string): Promise<Dashboard[]> {
    return (await this.tenantDashboards(tenantId)).sort((a, b) => a.name.localeCompare(b.name)).map(view);
  }

  async get(tenantId: string, id: string): Promise<Dashboard> {
    const stored = await this.state.get<StoredDashboard>(DASHBOARDS, id);
    if (!stored || stored.tenantId !== tenantId) throw notFound();
    return view(stored);
  }

  async create(tenantId: string, fields: { name: string; charts: ChartSpec[] }): Promise<Dashboard> {
    if ((await this.tenantDashboards(tenantId)).length >= MAX_DASHBOARDS_PER_TENANT) {
      throw new ApiError(409, `A tenant keeps at most ${MAX_DASHBOARDS_PER_TENANT} dashboards: remove one first`);
    }
    const dashboard: StoredDashboard = { id: `dsh_${randomBytes(8).toString('hex')}`, tenantId, name: fields.name, charts: fields.charts, updatedAt: Date.now() };
    await this.state.put(DASHBOARDS, dashboard.id, dashboard);
    return view(dashboard);
  }

  async replace(tenantId: string, id: string, fields: { name: string; charts: ChartSpec[] }): Promise<Dashboard> {
    for (;;) {
      const current = await this.state.getVersioned<StoredDashboard>(DASHBOARDS, id);
      if (!current || current.value.tenantId !== tenantId) throw notFound();
      const next: StoredDashboard = { ...current.value, name: fields.name, charts: fields.charts, updatedAt: Date.now() };
      if ((await this.state.update(DASHBOARDS, id, next, current.revision)) !== undefined) return view(next);
    }
  }

  async remove(tenantId: string, id: string): Promise<void> {
    await this.get(tenantId, id);
    await this.state.delete(DASHBOARDS, id);
  }

  private async tenantDashboards(tenantId: string): Promise<StoredDashboard[]> {
    return (await this.state.list<StoredDashboard>(DASHBOARDS)).map(([, d]) => d).filter((d) => d?.tenantId === tenantId);
  }
}
