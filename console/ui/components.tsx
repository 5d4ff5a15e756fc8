/**
 * Small pieces every page uses: error and loading notes, a copy button, a key/value table, label
 * chips, the attribute filter editor, and the empty state that tells a new user what to send and how.
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import type { AttributeFilter } from '../api.ts';
import { useSession } from './hooks.ts';
import { Link } from './router.tsx';

export function ErrorNote({ error, testid = 'error' }: { error: string; testid?: string }) {
  return error ? <p class="note note-error" role="alert" data-testid={testid}>{error}</p> : null;
}

/** Where a member would find the controls an admin has: says why they are not there. */
export function ReadOnlyNote() {
  return <p class="muted small" data-testid="read-only">You have read-only access (member): an admin or owner of your tenant makes changes here.</p>;
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return <p class="muted" role="status">{what}…</p>;
}

/** Copies `text`; where the Clipboard API is not offered (plain http off localhost) it says to copy by hand. */
export function CopyButton({ text, testid, label = 'Copy' }: { text: string; testid?: string; label?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setState('copied');
    } catch {
      setState('failed');
    }
    setTimeout(() => setState('idle'), 2000);
  };
  return (
    <button type="button" class="small-button" onClick={copy} data-testid={testid} data-copy={text} aria-live="polite">
      {state === 'copied' ? 'Copied' : state === 'failed' ? 'Select and copy' : label}
    </button>
  );
}

/** Text to copy: a monospace block and its copy button. */
export function CodeBlock({ text, testid, copyTestid }: { text: string; testid?: string; copyTestid?: string }) {
  return (
    <div class="code-block">
      <pre data-testid={testid}>{text}</pre>
      <CopyButton text={text} testid={copyTestid} />
    </div>
  );
}

export function KeyValues({ values, testid, empty = 'none' }: { values: Record<string, string>; testid?: string; empty?: string }) {
  const keys = Object.keys(values).sort();
  if (keys.length === 0) return <p class="muted small">{empty}</p>;
  return (
    <table class="kv" data-testid={testid}>
      <tbody>
        {keys.map((key) => (
          <tr key={key}>
            <th scope="row">{key}</th>
            <td>{values[key]}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Labels (an alert rule's, a silence's) as `key=value` chips; nothing when there are none. */
export function LabelChips({ labels }: { labels: Record<string, string> | undefined }) {
  const entries = Object.entries(labels ?? {});
  if (entries.length === 0) return null;
  return <ul class="chips label-chips" aria-label="Labels">{entries.map(([key, value]) => <li key={key} class="chip"><code>{key}={value}</code></li>)}</ul>;
}

/** The Service field of a search form. `current` (the URL's) stays an option when the range has none of it. */
export function ServiceSelect({ value, services, current, onChange, disabled, testid }: {
  value: string; services: string[]; current: string; onChange: (service: string) => void; disabled?: boolean; testid: string;
}) {
  return (
    <label class="field">Service
      <select value={value} onChange={(event) => onChange(event.currentTarget.value)} disabled={disabled} data-testid={testid}>
        <option value="">All services</option>
        {[...new Set([...services, ...(current ? [current] : [])])].map((name) => <option key={name} value={name}>{name}</option>)}
      </select>
    </label>
  );
}

/** `key=value` as the URL holds an attribute filter (`attr=http.route=/cart`): split at the first `=`. */
export function parseAttribute(text: string): AttributeFilter | undefined {
  const at = text.indexOf('=');
  if (at <= 0) return undefined;
  return { key: text.slice(0, at).trim(), value: text.slice(at + 1).trim() };
}

/** The attribute filters of a search form: chips, and a `key=value` field to add one. */
export function AttributeFilters({ value, onChange }: { value: string[]; onChange: (next: string[]) => void }) {
  const [draft, setDraft] = useState('');
  const [error, setError] = useState('');
  const add = () => {
    if (!draft.trim()) return;
    if (!parseAttribute(draft)) {
      setError('Write key=value');
      return;
    }
    setError('');
    onChange([...value, draft.trim()]);
    setDraft('');
  };
  return (
    <div class="field attributes">
      <label for="attribute-draft">Attribute</label>
      <div class="attribute-row">
        <input
          id="attribute-draft"
          placeholder="key=value"
          value={draft}
          onInput={(event) => setDraft(event.currentTarget.value)}
          onKeyDown={(event) => {
            if (event.key === 'Enter') {
              event.preventDefault();
              add();
            }
          }}
          data-testid="attribute-input"
        />
        <button type="button" class="small-button" onClick={add}>Add</button>
      </div>
      {error && <span class="error-text">{error}</span>}
      {value.length > 0 && (
        <ul class="chips" aria-label="Attribute filters">
          {value.map((one, i) => (
            <li key={one} class="chip">
              <code>{one}</code>
              <button type="button" class="chip-remove" onClick={() => onChange(value.filter((_, j) => j !== i))} aria-label={`Remove filter ${one}`}>×</button>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** Where sources send, from the server or (when it does not say) this host with Sluice's default ports. */
export function useIngestEndpoints(): { otlpHttp: string; otlpGrpc: string } {
  const me = useSession();
  const host = location.hostname.includes(':') ? `[${location.hostname}]` : location.hostname;
  return me.ingest ?? { otlpHttp: `${location.protocol}//${host}:4318`, otlpGrpc: `${location.protocol}//${host}:4317` };
}

/** The environment lines an OpenTelemetry SDK or Collector needs to send here. */
export function otlpSetup(endpoints: { otlpHttp: string; otlpGrpc: string }, apiKey = '<your API key>'): string {
  return [
    `export OTEL_EXPORTER_OTLP_ENDPOINT=${endpoints.otlpHttp}`,
    `export OTEL_EXPORTER_OTLP_HEADERS="x-api-key=${apiKey}"`,
    `# or over gRPC: export OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_EXPORTER_OTLP_ENDPOINT=${endpoints.otlpGrpc}`,
  ].join('\n');
}

/** The empty state of a page with no data yet: what to send, where, with which key. */
export function Onboarding({ signal, children }: { signal: 'logs' | 'traces' | 'metrics' | 'telemetry'; children?: ComponentChildren }) {
  const endpoints = useIngestEndpoints();
  return (
    <section class="empty" data-testid="empty-state">
      <h2>No {signal} in this time range yet</h2>
      {children}
      <p>
        Create a source on the <Link href="/sources">Sources</Link> page and give its API key to your OpenTelemetry SDK or
        Collector with these lines:
      </p>
      <CodeBlock text={otlpSetup(endpoints)} testid="empty-state-setup" />
      {signal === 'logs' && <p>Hosts without an SDK can ship their logs with the Sluice agent: create an install token for a source on the Sources page.</p>}
      <p class="muted small">To see the console with sample data first: <code>{'npx sluice demo --key <your API key>'}</code> sends a small shop's traces, logs and metrics.</p>
    </section>
  );
}
