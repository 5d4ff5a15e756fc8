/**
 * Sources and their API keys, and the agents that report to them. A key is shown once, when it
 * is issued (the server keeps only its hash); an install token comes with the ready command that
 * installs the agent on a cluster.
 */
import { useState } from 'preact/hooks';
import type { InstallTokenView, IssuedKeyView, SourceKey, SourceView } from '../../api.ts';
import { api, mayConfigure, problem } from '../api.ts';
import { CodeBlock, ErrorNote, Loading, ReadOnlyNote, otlpSetup, useIngestEndpoints } from '../components.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { formatAgo, formatDateTime } from '../time.ts';

type Shown = { kind: 'key'; sourceName: string; issued: IssuedKeyView; replaced?: string } | { kind: 'install'; sourceName: string; token: InstallTokenView };

function ShownOnce({ shown, onClose }: { shown: Shown; onClose: () => void }) {
  const endpoints = useIngestEndpoints();
  return (
    <section class="callout" data-testid={shown.kind === 'key' ? 'issued-key' : 'install-token'} aria-live="polite">
      <div class="callout-head">
        <h2>{shown.kind === 'key' ? `New API key for ${shown.sourceName}` : `Install the agent for ${shown.sourceName}`}</h2>
        <button type="button" class="small-button" onClick={onClose} data-testid="callout-close">Done</button>
      </div>
      {shown.kind === 'key' ? (
        <>
          <p><strong>Copy it now: it is shown this once.</strong> Sluice keeps only its hash.{shown.replaced && ` Key ${shown.replaced} is revoked.`}</p>
          <CodeBlock text={shown.issued.apiKey} testid="api-key" copyTestid="api-key-copy" />
          <p>Give it to an OpenTelemetry SDK or Collector:</p>
          <CodeBlock text={otlpSetup(endpoints, shown.issued.apiKey)} testid="api-key-setup" />
        </>
      ) : (
        <>
          <p>Run this where <code>kubectl</code> reaches your cluster. The link works once and expires {formatDateTime(shown.token.expiresAt)}.</p>
          <CodeBlock text={shown.token.command} testid="install-command" copyTestid="install-command-copy" />
        </>
      )}
    </section>
  );
}

function KeyList({ source, busy, onRotate, onRevoke }: { source: SourceView; busy: boolean; onRotate: (key: SourceKey) => void; onRevoke: (key: SourceKey) => void }) {
  const keys = [...source.keys].sort((a, b) => Number(a.revokedAt !== undefined) - Number(b.revokedAt !== undefined) || b.createdAt - a.createdAt);
  if (keys.length === 0) return <span class="muted">no keys</span>;
  return (
    <ul class="keys">
      {keys.map((key) => (
        <li key={key.id} class={key.revokedAt ? 'revoked' : ''} data-testid="source-key">
          <code title={key.id}>{key.label || key.id}</code>{' '}
          {key.revokedAt ? (
            <span class="badge" title={formatDateTime(key.revokedAt)}>revoked {formatAgo(key.revokedAt)}</span>
          ) : (
            <>
              <span class="muted small" title={formatDateTime(key.createdAt)}>created {formatAgo(key.createdAt)}</span>{' '}
              {mayConfigure() && <>
              <button type="button" class="small-button" disabled={busy} onClick={() => onRotate(key)} data-testid="key-rotate">Rotate</button>{' '}
              <button type="button" class="small-button danger" disabled={busy} onClick={() => onRevoke(key)} data-testid="key-revoke">Revoke</button>
              </>}
            </>
          )}
        </li>
      ))}
    </ul>
  );
}

export function SourcesPage() {
  useTitle('Sources');
  const sources = useLoad(() => api.sources(), []);
  const agents = useLoad(() => api.agents(), []);
  const [name, setName] = useState('');
  const [shown, setShown] = useState<Shown | undefined>();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');

  /** One change at a time; the list is read again after it, so it shows what the server holds. */
  const act = async (work: () => Promise<Shown | undefined>) => {
    setBusy(true);
    setError('');
    try {
      const result = await work();
      if (result) setShown(result);
      sources.reload();
    } catch (err) {
      setError(problem(err));
    } finally {
      setBusy(false);
    }
  };
  const create = (event: Event) => {
    event.preventDefault();
    const wanted = name.trim();
    if (!wanted) return;
    void act(async () => {
      const { source, key } = await api.createSource(wanted);
      setName('');
      return { kind: 'key', sourceName: source.name, issued: key };
    });
  };
  const names = new Map(sources.data?.sources.map((source) => [source.id, source.name]) ?? []);
  const agentCount = (sourceId: string) => agents.data?.agents.filter((agent) => agent.sourceId === sourceId).length ?? 0;

  return (
    <>
      <div class="page-head">
        <h1>Sources</h1>
        {mayConfigure() ? <form class="inline-form" onSubmit={create}>
          <label class="inline">New source <input value={name} onInput={(event) => setName(event.currentTarget.value)} placeholder="e.g. checkout" required data-testid="source-name" /></label>
          <button type="submit" class="primary" disabled={busy} data-testid="source-create">Create source</button>
        </form> : <ReadOnlyNote />}
      </div>
      <ErrorNote error={error || sources.error} />
      {shown && <ShownOnce shown={shown} onClose={() => setShown(undefined)} />}
      {sources.loading && !sources.data && <Loading />}
      {sources.data && sources.data.sources.length === 0 && (
        <section class="empty" data-testid="sources-empty">
          <h2>No sources yet</h2>
          <p>A source is an application or a team that sends telemetry. Create one above: you get its API key, which your OpenTelemetry SDK, Collector or the Sluice agent sends with every request.</p>
        </section>
      )}
      {sources.data && sources.data.sources.length > 0 && (
        <table class="table" data-testid="sources-table">
          <thead><tr><th>Source</th><th>Created</th><th>API keys</th><th>Agents</th></tr></thead>
          <tbody>
            {sources.data.sources.map((source) => (
              <tr key={source.id} data-testid="source-row">
                <td><strong>{source.name}</strong><div class="muted small"><code>{source.id}</code></div></td>
                <td title={formatDateTime(source.createdAt)}>{formatAgo(source.createdAt)}</td>
                <td>
                  <KeyList
                    source={source}
                    busy={busy}
                    onRotate={(key) => act(async () => ({ kind: 'key', sourceName: source.name, issued: await api.issueKey(source.id, key.id), replaced: key.label || key.id }))}
                    onRevoke={(key) => {
                      if (!confirm(`Revoke key ${key.label || key.id} of ${source.name}? Senders using it get 401 from now on.`)) return;
                      void act(async () => void (await api.revokeKey(source.id, key.id)));
                    }}
                  />
                  {mayConfigure() && <button type="button" class="small-button" disabled={busy} onClick={() => act(async () => ({ kind: 'key', sourceName: source.name, issued: await api.issueKey(source.id) }))} data-testid="key-add">Add a key</button>}
                </td>
                <td>
                  {agentCount(source.id) > 0 && <div class="small" data-testid="source-agents">{agentCount(source.id)} reporting</div>}
                  {mayConfigure() && <button type="button" class="small-button" disabled={busy} onClick={() => act(async () => ({ kind: 'install', sourceName: source.name, token: await api.installToken(source.id) }))} data-testid="install-token-create">Install an agent</button>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <h2 class="section-title">Agents</h2>
      <ErrorNote error={agents.error} />
      {agents.data && agents.data.agents.length === 0 && <p class="muted" data-testid="agents-empty">No agent has reported yet.{mayConfigure() && ' Press “Install an agent” next to a source to get the command that installs one.'}</p>}
      {agents.data && agents.data.agents.length > 0 && (
        <table class="table" data-testid="agents-table">
          <thead><tr><th>Host</th><th>Source</th><th>Version</th><th>System</th><th>Status</th><th>Last seen</th></tr></thead>
          <tbody>
            {[...agents.data.agents].sort((a, b) => Number(b.stale) - Number(a.stale) || a.host.localeCompare(b.host)).map((agent) => (
              <tr key={`${agent.sourceId}/${agent.agentId}`} class={agent.stale ? 'stale' : ''} data-testid="agent-row">
                <td><strong>{agent.host}</strong><div class="muted small"><code>{agent.agentId}</code></div></td>
                <td>{names.get(agent.sourceId) ?? agent.sourceId}</td>
                <td><code>{agent.version}</code></td>
                <td>{agent.os}/{agent.arch}</td>
                <td>{agent.status}</td>
                <td title={formatDateTime(agent.lastSeen)}>
                  {formatAgo(agent.lastSeen)}{' '}
                  {agent.stale && <span class="badge badge-warn" data-testid="agent-stale" title="No heartbeat for 5 minutes">stale</span>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
