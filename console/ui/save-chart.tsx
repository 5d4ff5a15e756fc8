/**
 * "Save to dashboard" on the Metrics page: the current query becomes a chart at the end of an
 * existing dashboard (PUT with its charts plus this one) or of a new one (POST).
 */
import { useState } from 'preact/hooks';
import type { ChartSpec, Dashboard } from '../api.ts';
import { api, mayConfigure, problem } from './api.ts';
import { ErrorNote } from './components.tsx';
import { describeQuery } from './metric-chart.tsx';
import { Link } from './router.tsx';

const NEW = '';

export function SaveToDashboard({ chart }: { chart: ChartSpec['query'] }) {
  const [open, setOpen] = useState(false);
  const [dashboards, setDashboards] = useState<Dashboard[] | undefined>();
  const [target, setTarget] = useState(NEW);
  const [newName, setNewName] = useState('');
  const [title, setTitle] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [saved, setSaved] = useState<Dashboard | undefined>();

  const start = async () => {
    setOpen(true);
    setSaved(undefined);
    setTitle(describeQuery(chart));
    setError('');
    try {
      const { dashboards: list } = await api.dashboards();
      setDashboards(list);
      setTarget(list[0]?.id ?? NEW);
    } catch (err) {
      setError(problem(err));
    }
  };
  const save = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError('');
    const spec: ChartSpec = { title: title.trim() || describeQuery(chart), query: chart };
    try {
      const existing = dashboards?.find((one) => one.id === target);
      setSaved(existing
        ? await api.saveDashboard(existing.id, { name: existing.name, charts: [...existing.charts, spec] })
        : await api.createDashboard({ name: newName.trim() || 'My dashboard', charts: [spec] }));
      setOpen(false);
    } catch (err) {
      setError(problem(err));
    } finally {
      setBusy(false);
    }
  };

  if (!mayConfigure()) return null;
  if (!open) {
    return (
      <div class="save-chart">
        {saved && <span class="ok-text" data-testid="save-dashboard-done">Saved to <Link href={`/dashboards/${encodeURIComponent(saved.id)}`}>{saved.name}</Link></span>}
        <button type="button" class="small-button" onClick={start} data-testid="save-dashboard">Save to dashboard</button>
      </div>
    );
  }
  return (
    <form class="save-chart-form" onSubmit={save} data-testid="save-dashboard-form">
      <label class="field wide">Chart title
        <input value={title} onInput={(event) => setTitle(event.currentTarget.value)} data-testid="save-dashboard-title" />
      </label>
      <label class="field">Dashboard
        <select value={target} onChange={(event) => setTarget(event.currentTarget.value)} data-testid="save-dashboard-target">
          {(dashboards ?? []).map((one) => <option key={one.id} value={one.id}>{one.name}</option>)}
          <option value={NEW}>New dashboard…</option>
        </select>
      </label>
      {target === NEW && (
        <label class="field">Name
          <input value={newName} placeholder="My dashboard" onInput={(event) => setNewName(event.currentTarget.value)} data-testid="save-dashboard-name" />
        </label>
      )}
      <div class="filter-actions">
        <button type="submit" class="primary" disabled={busy || !dashboards} data-testid="save-dashboard-submit">Save</button>
        <button type="button" onClick={() => setOpen(false)}>Cancel</button>
      </div>
      <ErrorNote error={error} />
    </form>
  );
}
