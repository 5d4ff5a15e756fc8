/**
 * Alerts: the tenant's rules, firing first, each with its state (a badge that says it in words,
 * not only in colour), its condition as a sentence, the value its last evaluation measured and
 * when; a rule's own page with its definition, state and history of changes (which notifications
 * a silence held back); the silences. Both pages read the API again every 10 s, as the evaluator
 * moves states between visits. Admins and owners create, change, pause and delete rules; members
 * read (the API refuses them the rest, so the controls are not shown).
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { TimeChart, type ChartLine } from '../chart.tsx';
import type { AlertRule, AlertRuleSummary, AlertStateName, AlertStatus, ContactPoint, RuleFields, Transition } from '../../api.ts';
import { api, mayConfigure, problem } from '../api.ts';
import { RuleForm } from '../alert-rule-form.tsx';
import { describeCondition, formatAlertValue, formatLabels, formatSeconds } from '../alert-words.ts';
import { ErrorNote, LabelChips, Loading, ReadOnlyNote } from '../components.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import { Silences } from '../silences.tsx';
import { formatAgo, formatDateTime } from '../time.ts';

/** How often the pages read states again: the evaluator's round is 30 s by default. */
const REFRESH_MS = 10_000;
const STATE_ORDER: Record<AlertStateName | 'none', number> = { firing: 0, pending: 1, ok: 2, none: 3 };
const STATE_WORDS: Record<AlertStateName | 'none', string> = { firing: 'Firing', pending: 'Pending', ok: 'OK', none: 'Not evaluated' };
const NO_DATA_WORDS: Record<RuleFields['noData'], string> = { ok: 'counts as OK', firing: 'counts as firing', keep: 'keeps the last state' };

/** A state in words on its colour: red firing, amber pending, green OK, grey before the first evaluation. */
export function StateBadge({ state, testid = 'rule-state' }: { state: AlertStateName | undefined; testid?: string }) {
  const name = state ?? 'none';
  return <span class={`alert-state alert-state-${name}`} data-testid={testid} data-state={name}>{STATE_WORDS[name]}</span>;
}

/** Runs `refresh` every `ms` while the page is open. */
function useEvery(ms: number, refresh: () => void): void {
  useEffect(() => {
    const timer = setInterval(refresh, ms);
    return () => clearInterval(timer);
  }, [ms]);
}

const pointKey = (point: { siteId: string; formId: string }) => `${point.siteId}/${point.formId}`;

/** "ops / On call", or the ids where the form is no longer active. */
function contactPointName(notify: AlertRule['notify'], points: ContactPoint[] | undefined): string {
  if (!notify) return 'none';
  const point = points?.find((one) => pointKey(one) === pointKey(notify));
  return point ? `${point.siteName} / ${point.formName}` : `${pointKey(notify)} (not an active form)`;
}

/** The fields a PUT takes: the rule as stored, without what the server sets. */
function fieldsOf(rule: AlertRule): RuleFields {
  const { id: _id, tenantId: _tenantId, createdAt: _createdAt, updatedAt: _updatedAt, ...fields } = rule;
  return fields;
}

/** The last evaluation: "0.8 (80 %)", and when. */
function LastValue({ rule, status }: AlertRuleSummary) {
  if (!status || status.evaluatedAt === 0) return <span class="muted">not evaluated yet</span>;
  return (
    <>
      <span data-testid="rule-value">{formatAlertValue(rule.condition, status.value)}</span>
      <div class="muted small" title={formatDateTime(status.evaluatedAt)}>{formatAgo(status.evaluatedAt)}</div>
    </>
  );
}

function RuleTable({ rules, points }: { rules: AlertRuleSummary[]; points: ContactPoint[] | undefined }) {
  const sorted = [...rules].sort((a, b) => STATE_ORDER[a.status?.state ?? 'none'] - STATE_ORDER[b.status?.state ?? 'none'] || a.rule.name.localeCompare(b.rule.name));
  return (
    <table class="table" data-testid="rules-table">
      <caption class="sr-only">Alert rules, firing first</caption>
      <thead><tr><th>State</th><th>Rule</th><th>Condition</th><th>Last value</th><th>Notifies</th></tr></thead>
      <tbody>
        {sorted.map(({ rule, status }) => (
          <tr key={rule.id} data-testid="rule-row" data-rule={rule.name}>
            <td class="nowrap">
              <StateBadge state={status?.state} />
              {!rule.enabled && <span class="badge" data-testid="rule-disabled">disabled</span>}
              {status && status.since > 0 && <div class="muted small" title={formatDateTime(status.since)}>since {formatAgo(status.since)}</div>}
            </td>
            <td><Link href={`/alerts/${encodeURIComponent(rule.id)}`} data-testid="rule-link">{rule.name}</Link><LabelChips labels={rule.labels} /></td>
            <td data-testid="rule-condition">{describeCondition(rule)}</td>
            <td class="nowrap"><LastValue rule={rule} status={status} /></td>
            <td class={rule.notify ? '' : 'muted'}>{contactPointName(rule.notify, points)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** "3 rules: 1 firing, 0 pending, 2 OK". */
function StateCounts({ rules }: { rules: AlertRuleSummary[] }) {
  const count = (state: AlertStateName) => rules.filter((one) => one.status?.state === state).length;
  return (
    <p class="state-counts" data-testid="rule-counts">
      {rules.length} {rules.length === 1 ? 'rule' : 'rules'}: {count('firing') > 0 ? <strong class="bad">{count('firing')} firing</strong> : '0 firing'}, {count('pending')} pending, {count('ok')} OK
    </p>
  );
}

export function AlertsPage() {
  useTitle('Alerts');
  const rules = useLoad(() => api.alertRules(), []);
  const points = useLoad(() => api.contactPoints(), []);
  useEvery(REFRESH_MS, rules.reload);
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<AlertRule | undefined>();
  const list = rules.data?.rules ?? [];

  const create = async (fields: RuleFields) => {
    const made = await api.createAlertRule(fields);
    setCreating(false);
    setCreated(made.rule);
    rules.reload();
  };
  return (
    <>
      <div class="page-head">
        <h1>Alerts</h1>
        <div class="head-actions">
          <button type="button" class="small-button" onClick={rules.reload} disabled={rules.loading} data-testid="alerts-refresh">Refresh</button>
          {mayConfigure() && !creating && <button type="button" class="primary" onClick={() => { setCreating(true); setCreated(undefined); }} data-testid="rule-new">New rule</button>}
        </div>
      </div>
      {!mayConfigure() && <ReadOnlyNote />}
      {creating && (
        <section class="card" aria-labelledby="rule-form-title">
          <h2 id="rule-form-title">New rule</h2>
          <RuleForm submitLabel="Create rule" onSave={create} onCancel={() => setCreating(false)} />
        </section>
      )}
      {created && <p class="note note-ok" role="status" data-testid="rule-created">Rule <Link href={`/alerts/${encodeURIComponent(created.id)}`}>{created.name}</Link> created: the next round evaluates it.</p>}
      <ErrorNote error={rules.error} />
      {rules.loading && !rules.data && <Loading />}
      {rules.data && list.length === 0 && !creating && (
        <section class="empty" data-testid="rules-empty">
          <h2>No alert rules yet</h2>
          <p>A rule watches a number the console charts — a service's error rate or latency, a metric, a count of log entries, deploy regressions — and tells a relay form's recipients when it crosses a threshold.{mayConfigure() && ' Press “New rule” to make one.'}</p>
        </section>
      )}
      {list.length > 0 && <><StateCounts rules={list} /><RuleTable rules={list} points={points.data?.contactPoints} /></>}
      {rules.data && <Silences rules={list.map((one) => one.rule)} />}
    </>
  );
}

/** What a transition did about notifying: held back by a silence, handed over, or nothing to tell. */
function Notified({ transition, notifiedSeq, rule }: { transition: Transition; notifiedSeq: number; rule: AlertRule }) {
  if (transition.silenced) return <span class="badge badge-silenced" data-testid="history-silenced" title="A silence held the notification back">silenced</span>;
  if (transition.kind !== 'firing' && transition.kind !== 'resolved' && transition.kind !== 'repeat') return <span class="muted">—</span>;
  if (transition.seq > notifiedSeq) return <span>due</span>;
  return <span>{rule.notify ? 'handed over' : 'no contact point'}</span>;
}

/** Whether the rule was firing at `at`, by its history (the state of the last change at or before it). */
function firingAt(history: Transition[], at: number): boolean {
  let firing = false;
  for (const transition of history) if (transition.at <= at) firing = transition.to === 'firing';
  return firing;
}

/**
 * The rule's last evaluations (kept with its status) as a chart: the value, the threshold, the
 * value again in red where the rule was firing, and the deploy markers of its service.
 */
function RuleChart({ rule, status }: { rule: AlertRule; status: AlertStatus | null }) {
  const samples = status?.samples ?? [];
  const range = samples.length > 1 ? { from: samples[0]![0], to: samples[samples.length - 1]![0] } : undefined;
  const service = 'service' in rule.condition && typeof rule.condition.service === 'string' ? rule.condition.service : undefined;
  const deploys = useLoad((signal) => (range ? api.deploys({ ...range, ...(service ? { services: [service] } : {}) }, signal) : Promise.resolve({ deploys: [] })), [range?.from, range?.to, service]);
  const lines = useMemo((): ChartLine[] => [
    { label: 'value', points: samples },
    { label: `threshold (${rule.comparator})`, points: samples.map(([at]) => [at, rule.threshold]) },
    { label: 'firing', points: samples.map(([at, value]) => [at, firingAt(status?.history ?? [], at) ? value : null]) },
  ], [status, rule.threshold, rule.comparator]);
  if (!range) return <p class="muted" data-testid="rule-chart-empty">The chart fills in as the rule is evaluated.</p>;
  return (
    <TimeChart
      lines={lines} range={range} deploys={deploys.data?.deploys} height={200} testid="rule-chart"
      colours={['#2563eb', '#64748b', '#b91c1c']} unit={rule.condition.kind === 'latency' ? 'ms' : ''} onZoom={() => {}}
    />
  );
}

export function AlertRulePage({ params }: { params: Record<string, string> }) {
  const id = params.id!;
  const loaded = useLoad(() => api.alertRule(id), [id]);
  const points = useLoad(() => api.contactPoints(), []);
  useEvery(REFRESH_MS, loaded.reload);
  const [editing, setEditing] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  useTitle(loaded.data?.rule.name ?? 'Alert rule');

  if (loaded.error && !loaded.data) {
    return (
      <section class="empty" data-testid="rule-not-found">
        <h1>No such alert rule</h1>
        <p>{loaded.error} <Link href="/alerts">All alert rules</Link></p>
      </section>
    );
  }
  if (!loaded.data) return <Loading />;
  const { rule, status } = loaded.data;

  const save = async (fields: RuleFields) => {
    await api.saveAlertRule(rule.id, fields);
    setEditing(false);
    loaded.reload();
  };
  const act = async (work: () => Promise<void>) => {
    setBusy(true);
    setError('');
    try {
      await work();
    } catch (err) {
      setError(problem(err));
    } finally {
      setBusy(false);
    }
  };
  const toggle = () => act(() => save({ ...fieldsOf(rule), enabled: !rule.enabled }));
  const remove = () => {
    if (!confirm(`Delete the alert rule “${rule.name}”? Its state and history go with it.`)) return;
    void act(async () => {
      await api.deleteAlertRule(rule.id);
      navigate('/alerts');
    });
  };
  const history = [...(status?.history ?? [])].reverse();
  return (
    <>
      <div class="page-head">
        <div>
          <p class="crumbs"><Link href="/alerts">Alerts</Link> /</p>
          <h1 data-testid="rule-title">{rule.name} <StateBadge state={status?.state} />{!rule.enabled && <span class="badge">disabled</span>}</h1>
        </div>
        {mayConfigure() && !editing && (
          <div class="head-actions">
            <button type="button" class="small-button" onClick={() => setEditing(true)} disabled={busy} data-testid="rule-edit">Edit</button>
            <button type="button" class="small-button" onClick={toggle} disabled={busy} data-testid="rule-toggle">{rule.enabled ? 'Disable' : 'Enable'}</button>
            <button type="button" class="small-button danger" onClick={remove} disabled={busy} data-testid="rule-delete">Delete</button>
          </div>
        )}
      </div>
      <ErrorNote error={error || loaded.error} />
      {editing && (
        <section class="card" aria-labelledby="rule-form-title">
          <h2 id="rule-form-title">Change the rule</h2>
          <RuleForm initial={fieldsOf(rule)} submitLabel="Save rule" onSave={save} onCancel={() => setEditing(false)} />
        </section>
      )}
      <div class="rule-cards">
        <section class="card" aria-labelledby="rule-definition">
          <h2 id="rule-definition" class="card-title">Definition</h2>
          <dl class="fields" data-testid="rule-definition">
            <dt>Condition</dt><dd data-testid="rule-condition">{describeCondition(rule)}</dd>
            <dt>No data</dt><dd>{NO_DATA_WORDS[rule.noData]}</dd>
            <dt>Labels</dt><dd>{formatLabels(rule.labels) || <span class="muted">none</span>}</dd>
            <dt>Notifies</dt><dd>{contactPointName(rule.notify, points.data?.contactPoints)}</dd>
            <dt>Reminds</dt><dd>{rule.repeatSeconds ? `every ${formatSeconds(rule.repeatSeconds)} while firing` : 'never'}</dd>
            <dt>Enabled</dt><dd>{rule.enabled ? 'yes: evaluated every round' : 'no: not evaluated, its state kept'}</dd>
            <dt>Changed</dt><dd title={formatDateTime(rule.updatedAt)}>{formatAgo(rule.updatedAt)}</dd>
          </dl>
        </section>
        <section class="card" aria-labelledby="rule-status">
          <h2 id="rule-status" class="card-title">Current state</h2>
          <dl class="fields">
            <dt>State</dt><dd><StateBadge state={status?.state} testid="rule-status-state" />{status && status.since > 0 && <span class="muted small"> since {formatDateTime(status.since)}</span>}</dd>
            <dt>Last value</dt><dd>{status && status.evaluatedAt > 0 ? formatAlertValue(rule.condition, status.value) : <span class="muted">not evaluated yet</span>}</dd>
            <dt>Evaluated</dt><dd>{status && status.evaluatedAt > 0 ? `${formatDateTime(status.evaluatedAt)} (${formatAgo(status.evaluatedAt)})` : '—'}</dd>
          </dl>
        </section>
      </div>
      <section class="card" aria-labelledby="rule-chart-title">
        <h2 id="rule-chart-title" class="card-title">Its last evaluations</h2>
        <RuleChart rule={rule} status={status} />
      </section>
      <h2 class="section-title">History</h2>
      {history.length === 0 ? <p class="muted" data-testid="history-empty">No change yet: the rule has stayed {STATE_WORDS[status?.state ?? 'none'].toLowerCase()}.</p> : (
        <table class="table" data-testid="history-table">
          <caption class="sr-only">The rule's changes of state, newest first</caption>
          <thead><tr><th>Time</th><th>Change</th><th>Event</th><th class="num">Value</th><th>Notification</th></tr></thead>
          <tbody>
            {history.map((transition) => (
              <tr key={transition.seq} data-testid="history-row" data-kind={transition.kind}>
                <td class="nowrap" title={formatAgo(transition.at)}>{formatDateTime(transition.at)}</td>
                <td class="nowrap"><StateBadge state={transition.from} testid="history-from" /> <span aria-hidden="true">→</span><span class="sr-only">to</span> <StateBadge state={transition.to} testid="history-to" /></td>
                <td>{transition.kind}</td>
                <td class="num">{formatAlertValue(rule.condition, transition.value)}</td>
                <td><Notified transition={transition} notifiedSeq={status?.notifiedSeq ?? 0} rule={rule} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
