/**
 * The Alerts page's silences: those not ended, each with what it matches (a rule, or labels a
 * rule must all carry), when it ends, why and who made it; a form for a new one (a rule or
 * labels, for 1 h to 7 days, with a comment) and "End now". A silence holds notifications back;
 * the rules still change state, and their history marks what was held.
 */
import { useState } from 'preact/hooks';
import type { AlertRule, Silence } from '../api.ts';
import { ApiFailure, api, mayConfigure, problem } from './api.ts';
import { formatUntil, parseLabels, readableRefusal } from './alert-words.ts';
import { ErrorNote, LabelChips, Loading } from './components.tsx';
import { useLoad } from './hooks.ts';
import { Link } from './router.tsx';
import { formatDateTime } from './time.ts';

const HOUR = 3_600_000;
const DURATIONS = [[HOUR, '1 h'], [4 * HOUR, '4 h'], [24 * HOUR, '24 h'], [7 * 24 * HOUR, '7 days']] as const;
const FIELD_LABELS = { ruleId: 'Rule', labels: 'Labels', endsAt: 'Duration', comment: 'Comment' };

function SilenceForm({ rules, onCreated, onCancel }: { rules: AlertRule[]; onCreated: () => void; onCancel: () => void }) {
  const [by, setBy] = useState<'rule' | 'labels'>(rules.length > 0 ? 'rule' : 'labels');
  const [ruleId, setRuleId] = useState(rules[0]?.id ?? '');
  const [labels, setLabels] = useState('');
  const [duration, setDuration] = useState(String(HOUR));
  const [comment, setComment] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');

  const submit = async (event: Event) => {
    event.preventDefault();
    setError('');
    let matcher: { ruleId: string } | { labels: Record<string, string> } = { ruleId };
    if (by === 'labels') {
      const parsed = parseLabels(labels);
      if ('error' in parsed) return setError(`Labels: ${parsed.error}`);
      if (Object.keys(parsed.labels).length === 0) return setError('Labels: write at least one key=value');
      matcher = { labels: parsed.labels };
    }
    setBusy(true);
    try {
      await api.createSilence({ ...matcher, endsAt: Date.now() + Number(duration), comment: comment.trim() });
      onCreated();
    } catch (err) {
      setError(err instanceof ApiFailure ? readableRefusal(err.message, typeof err.body.field === 'string' ? err.body.field : undefined, FIELD_LABELS) : problem(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card rule-form" onSubmit={submit} aria-label="New silence" data-testid="silence-form">
      <fieldset class="radios">
        <legend>Hold back the notifications of</legend>
        <label class="check"><input type="radio" name="silence-by" checked={by === 'rule'} disabled={rules.length === 0} onChange={() => setBy('rule')} data-testid="silence-by-rule" /> a rule</label>
        <label class="check"><input type="radio" name="silence-by" checked={by === 'labels'} onChange={() => setBy('labels')} data-testid="silence-by-labels" /> the rules with labels</label>
      </fieldset>
      <div class="form-row">
        {by === 'rule' ? (
          <div class="field grow">
            <label for="silence-rule">Rule</label>
            <select id="silence-rule" value={ruleId} onChange={(event) => setRuleId(event.currentTarget.value)} data-testid="silence-rule">
              {rules.map((rule) => <option key={rule.id} value={rule.id}>{rule.name}</option>)}
            </select>
          </div>
        ) : (
          <div class="field grow">
            <label for="silence-labels">Labels</label>
            <input id="silence-labels" value={labels} required placeholder="e.g. team=payments" aria-describedby="silence-labels-hint" onInput={(event) => setLabels(event.currentTarget.value)} data-testid="silence-labels" />
            <span id="silence-labels-hint" class="hint">key=value, comma-separated: a rule must carry every one.</span>
          </div>
        )}
        <div class="field">
          <label for="silence-duration">For</label>
          <select id="silence-duration" value={duration} onChange={(event) => setDuration(event.currentTarget.value)} data-testid="silence-duration">
            {DURATIONS.map(([ms, label]) => <option key={ms} value={String(ms)}>{label}</option>)}
          </select>
        </div>
        <div class="field grow">
          <label for="silence-comment">Comment</label>
          <input id="silence-comment" value={comment} required maxLength={1000} placeholder="e.g. deploy window" onInput={(event) => setComment(event.currentTarget.value)} data-testid="silence-comment" />
        </div>
      </div>
      <div class="form-actions">
        <button type="submit" class="primary" disabled={busy} data-testid="silence-submit">Create silence</button>
        <button type="button" onClick={onCancel}>Cancel</button>
        {error && <p class="note note-error form-refusal" role="alert" data-testid="silence-refusal">{error}</p>}
      </div>
    </form>
  );
}

/** What a silence matches: the rule by name (linked), or its labels. */
function Matches({ silence, rules }: { silence: Silence; rules: AlertRule[] }) {
  const rule = silence.ruleId ? rules.find((one) => one.id === silence.ruleId) : undefined;
  return (
    <>
      {silence.ruleId && <div>rule {rule ? <Link href={`/alerts/${encodeURIComponent(rule.id)}`}>{rule.name}</Link> : <code>{silence.ruleId}</code>}</div>}
      {silence.labels && Object.keys(silence.labels).length > 0 && <>labels <LabelChips labels={silence.labels} /></>}
    </>
  );
}

export function Silences({ rules }: { rules: AlertRule[] }) {
  const silences = useLoad(() => api.silences(), []);
  const [open, setOpen] = useState(false);
  const [error, setError] = useState('');
  const list = [...(silences.data?.silences ?? [])].sort((a, b) => a.endsAt - b.endsAt);
  const end = async (silence: Silence) => {
    setError('');
    try {
      await api.endSilence(silence.id);
    } catch (err) {
      setError(problem(err));
    }
    silences.reload();
  };
  return (
    <section aria-labelledby="silences-title" data-testid="silences">
      <div class="section-head">
        <h2 id="silences-title">Silences</h2>
        {mayConfigure() && !open && <button type="button" class="small-button" onClick={() => setOpen(true)} data-testid="silence-new">New silence</button>}
      </div>
      {open && <SilenceForm rules={rules} onCancel={() => setOpen(false)} onCreated={() => { setOpen(false); silences.reload(); }} />}
      <ErrorNote error={error || silences.error} />
      {silences.loading && !silences.data && <Loading />}
      {silences.data && list.length === 0 && <p class="muted" data-testid="silences-empty">No silence is on: every notification goes out.</p>}
      {list.length > 0 && (
        <table class="table" data-testid="silences-table">
          <caption class="sr-only">Silences on, the soonest to end first</caption>
          <thead><tr><th>Matches</th><th>Ends</th><th>Comment</th><th>By</th>{mayConfigure() && <th><span class="sr-only">Actions</span></th>}</tr></thead>
          <tbody>
            {list.map((silence) => (
              <tr key={silence.id} data-testid="silence-row">
                <td><Matches silence={silence} rules={rules} /></td>
                <td class="nowrap">{formatDateTime(silence.endsAt)} <span class="muted small">({formatUntil(silence.endsAt)})</span></td>
                <td data-testid="silence-comment-text">{silence.comment}</td>
                <td>{silence.createdBy}</td>
                {mayConfigure() && <td><button type="button" class="small-button" onClick={() => end(silence)} aria-label={`End now: the silence “${silence.comment}”`} data-testid="silence-end">End now</button></td>}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
