/**
 * The form that makes or changes an alert rule: a name; what to measure (a metric, a count of log
 * entries, a service's error rate or latency, deploy regressions) with the fields that kind needs;
 * above or below what, over which window, for how long; what no data means; labels; the relay form
 * to notify and how often to remind. The browser's own checks catch an empty field; the API's
 * refusal (400 naming its field) is said in the form's words beside the buttons, and the field
 * it names is marked invalid.
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import type { Aggregation, AlertCondition, MetricKind, RuleFields } from '../api.ts';
import { ApiFailure, api, problem } from './api.ts';
import { formatLabels, parseLabels, readableRefusal } from './alert-words.ts';
import { useLoad } from './hooks.ts';
import { AGGREGATIONS } from './pages/metrics.tsx';
import { SEVERITIES } from './severity.ts';

type Kind = AlertCondition['kind'];
const KINDS: Array<[Kind, string]> = [['error_rate', 'Error rate'], ['latency', 'Latency'], ['metric', 'Metric'], ['log_count', 'Log count'], ['deploy_regression', 'Deploy regression']];
const WINDOWS = [[60, '1 min'], [300, '5 min'], [900, '15 min'], [3600, '60 min']] as const;
const FOR = [[0, 'at once (0)'], [60, '1 min'], [300, '5 min'], [900, '15 min']] as const;
const REPEATS = [[0, 'never'], [3600, 'every 1 h'], [14_400, 'every 4 h'], [86_400, 'every 24 h']] as const;
const NO_DATA = [['ok', 'counts as OK'], ['firing', 'counts as firing'], ['keep', 'keeps the last state']] as const;
const THRESHOLD_HINTS: Record<Kind, string> = {
  error_rate: 'A fraction of the requests: 0.05 is 5 %.',
  latency: 'Milliseconds.',
  metric: 'In the metric’s unit, after the aggregation.',
  log_count: 'Entries in the window.',
  deploy_regression: '1 when a deploy was judged a regression, else 0: above 0.5 fires on one.',
};

/** Every input as the form holds it (text), whatever the kind, so switching kinds loses nothing. */
interface Draft {
  name: string; kind: Kind; service: string; percentile: string;
  metricName: string; metricKind: MetricKind; aggregation: Aggregation;
  logText: string; logServices: string; minSeverity: string;
  comparator: 'above' | 'below'; threshold: string; windowSeconds: string; forSeconds: string; noData: RuleFields['noData'];
  labels: string; notify: string; repeatSeconds: string; enabled: boolean;
}

/** The API's field → the form's label for it and the draft's key (its input's id is `rule-<key>`). */
const FIELDS: Record<string, [label: string, key: keyof Draft]> = {
  name: ['Name', 'name'], condition: ['Measure', 'kind'], 'condition.service': ['Service', 'service'], 'condition.percentile': ['Percentile', 'percentile'],
  'condition.query': ['Metric', 'metricName'], 'condition.query.name': ['Metric', 'metricName'], 'condition.query.kind': ['Kind', 'metricKind'],
  'condition.query.aggregation': ['Aggregation', 'aggregation'], 'condition.text': ['Text', 'logText'], 'condition.services': ['Services', 'logServices'],
  'condition.minSeverity': ['Least severity', 'minSeverity'], comparator: ['Is', 'comparator'], threshold: ['Threshold', 'threshold'],
  windowSeconds: ['Over the last', 'windowSeconds'], forSeconds: ['Firing after it holds for', 'forSeconds'], noData: ['A window without data', 'noData'],
  labels: ['Labels', 'labels'], notify: ['Contact point', 'notify'], repeatSeconds: ['Remind while firing', 'repeatSeconds'],
};
const LABELS = Object.fromEntries(Object.entries(FIELDS).map(([field, [label]]) => [field, label]));

const notifyValue = (notify: RuleFields['notify']) => (notify ? `${notify.siteId}/${notify.formId}` : '');
const list = (text: string) => text.split(',').map((one) => one.trim()).filter(Boolean);

function draftOf(rule: RuleFields | undefined): Draft {
  const c = rule?.condition;
  return {
    name: rule?.name ?? '',
    kind: c?.kind ?? 'error_rate',
    service: c && 'service' in c ? c.service ?? '' : '',
    percentile: String(c?.kind === 'latency' ? c.percentile : 95),
    metricName: c?.kind === 'metric' ? c.query.name : '',
    metricKind: c?.kind === 'metric' ? c.query.kind : 'gauge',
    aggregation: c?.kind === 'metric' ? c.query.aggregation : 'avg',
    logText: c?.kind === 'log_count' ? c.text ?? '' : '',
    logServices: c?.kind === 'log_count' ? (c.services ?? []).join(', ') : '',
    minSeverity: c?.kind === 'log_count' && c.minSeverity ? String(c.minSeverity) : '',
    comparator: rule?.comparator ?? 'above',
    threshold: rule ? String(rule.threshold) : '',
    windowSeconds: String(rule?.windowSeconds ?? 300),
    forSeconds: String(rule?.forSeconds ?? 0),
    noData: rule?.noData ?? 'ok',
    labels: formatLabels(rule?.labels ?? {}),
    notify: notifyValue(rule?.notify),
    repeatSeconds: String(rule?.repeatSeconds ?? 0),
    enabled: rule?.enabled ?? true,
  };
}

function conditionOf(draft: Draft): AlertCondition {
  const service = draft.service.trim();
  switch (draft.kind) {
    case 'error_rate': return { kind: 'error_rate', service };
    case 'latency': return { kind: 'latency', service, percentile: Number(draft.percentile) as 50 | 95 | 99 };
    case 'deploy_regression': return service ? { kind: 'deploy_regression', service } : { kind: 'deploy_regression' };
    case 'metric': return { kind: 'metric', query: { name: draft.metricName.trim(), kind: draft.metricKind, aggregation: draft.aggregation, ...(service ? { services: [service] } : {}) } };
    case 'log_count': {
      const services = list(draft.logServices);
      return {
        kind: 'log_count',
        ...(draft.logText.trim() ? { text: draft.logText.trim() } : {}),
        ...(services.length ? { services } : {}),
        ...(draft.minSeverity ? { minSeverity: Number(draft.minSeverity) } : {}),
      };
    }
  }
}

/** The rule's fields, or the one thing the form can tell is wrong before the API does. */
function fieldsOf(draft: Draft): { fields: RuleFields } | { field: string; message: string } {
  const labels = parseLabels(draft.labels);
  if ('error' in labels) return { field: 'labels', message: `Labels: ${labels.error}` };
  const threshold = Number(draft.threshold);
  if (draft.threshold.trim() === '' || !Number.isFinite(threshold)) return { field: 'threshold', message: 'Threshold: write a number' };
  const [siteId, formId] = draft.notify.split('/');
  return {
    fields: {
      name: draft.name.trim(),
      condition: conditionOf(draft),
      comparator: draft.comparator,
      threshold,
      windowSeconds: Number(draft.windowSeconds),
      forSeconds: Number(draft.forSeconds),
      noData: draft.noData,
      labels: labels.labels,
      ...(siteId && formId ? { notify: { siteId, formId } } : {}),
      repeatSeconds: Number(draft.repeatSeconds),
      enabled: draft.enabled,
    },
  };
}

/** The options, and the current value among them when the API holds one the form does not offer (a rule made elsewhere). */
function choices(options: ReadonlyArray<readonly [number, string]>, current: string, format: (n: number) => string): Array<[string, string]> {
  const shown = options.map(([value, label]) => [String(value), label] as [string, string]);
  return shown.some(([value]) => value === current) ? shown : [...shown, [current, format(Number(current))]];
}

function Field({ id, label, hint, children, wide }: { id: string; label: string; hint?: string; children: ComponentChildren; wide?: boolean }) {
  return (
    <div class={`field${wide ? ' grow' : ''}`}>
      <label for={id}>{label}</label>
      {children}
      {hint && <span id={`${id}-hint`} class="hint">{hint}</span>}
    </div>
  );
}

interface RuleFormProps {
  /** The rule to change; none: a new one. */
  initial?: RuleFields;
  submitLabel: string;
  onSave: (fields: RuleFields) => Promise<void>;
  onCancel: () => void;
}

export function RuleForm({ initial, submitLabel, onSave, onCancel }: RuleFormProps) {
  const [draft, setDraft] = useState(() => draftOf(initial));
  const [refusal, setRefusal] = useState<{ field?: string; message: string } | undefined>();
  const [busy, setBusy] = useState(false);
  // What the pickers offer: the services and metrics seen in the last day, the tenant's forms.
  const lastDay = () => ({ from: Date.now() - 86_400_000, to: Date.now() });
  const services = useLoad((signal) => api.services(lastDay(), signal), []);
  const metrics = useLoad((signal) => (draft.kind === 'metric' ? api.metricNames(lastDay(), signal) : Promise.resolve({ metrics: [] })), [draft.kind === 'metric']);
  const contactPoints = useLoad(() => api.contactPoints(), []);

  /** The draft's key of the input the refusal names (a field the form lacks: none). */
  const refused = refusal?.field === undefined ? undefined : (FIELDS[refusal.field] ?? FIELDS[refusal.field.replace(/\[.*$|\.[^.]*$/, '')])?.[1];
  /** A change; a change of the refused input takes its refusal away. */
  const set = (change: Partial<Draft>) => {
    setDraft((old) => ({ ...old, ...change }));
    if (refused && refused in change) setRefusal(undefined);
  };
  /** The props every input shares: its id, its hint, whether the refusal names it. */
  const input = (key: keyof Draft, hint = false) => ({
    id: `rule-${key}`,
    'aria-invalid': refused === key || undefined,
    'aria-describedby': [hint && `rule-${key}-hint`, refused === key && 'rule-refusal'].filter(Boolean).join(' ') || undefined,
  });
  const text = (key: keyof Draft) => (event: Event) => set({ [key]: (event.currentTarget as HTMLInputElement).value } as Partial<Draft>);

  const submit = async (event: Event) => {
    event.preventDefault();
    const made = fieldsOf(draft);
    if (!('fields' in made)) return setRefusal(made);
    setBusy(true);
    setRefusal(undefined);
    try {
      await onSave(made.fields);
    } catch (err) {
      const field = err instanceof ApiFailure && typeof err.body.field === 'string' ? err.body.field : undefined;
      setRefusal({ field, message: err instanceof ApiFailure ? readableRefusal(err.message, field, LABELS) : problem(err) });
    } finally {
      setBusy(false);
    }
  };
  const serviceNames = services.data?.services ?? [];
  const service = (optional: boolean) => (
    <Field id="rule-service" label={optional ? 'Service (optional)' : 'Service'} hint={optional ? 'Empty: any service.' : undefined}>
      <input {...input('service', optional)} list="rule-services" value={draft.service} required={!optional} autocomplete="off" placeholder={`e.g. ${serviceNames[0] ?? 'checkout'}`} onInput={text('service')} data-testid="rule-service" />
    </Field>
  );

  return (
    <form class="rule-form" onSubmit={submit} aria-label={initial ? 'Change the rule' : 'New rule'} data-testid="rule-form">
      <datalist id="rule-services">{serviceNames.map((name) => <option key={name} value={name} />)}</datalist>
      <div class="form-row">
        <Field id="rule-name" label="Name" wide>
          <input {...input('name')} value={draft.name} required maxLength={200} placeholder="e.g. Checkout failing" onInput={text('name')} data-testid="rule-name" />
        </Field>
      </div>
      <fieldset>
        <legend>Condition</legend>
        <div class="form-row">
          <Field id="rule-kind" label="Measure">
            <select {...input('kind')} value={draft.kind} onChange={text('kind')} data-testid="rule-kind">
              {KINDS.map(([kind, label]) => <option key={kind} value={kind}>{label}</option>)}
            </select>
          </Field>
          {(draft.kind === 'error_rate' || draft.kind === 'latency') && service(false)}
          {draft.kind === 'latency' && (
            <Field id="rule-percentile" label="Percentile">
              <select {...input('percentile')} value={draft.percentile} onChange={text('percentile')} data-testid="rule-percentile">
                {['50', '95', '99'].map((p) => <option key={p} value={p}>p{p}</option>)}
              </select>
            </Field>
          )}
          {draft.kind === 'deploy_regression' && service(true)}
          {draft.kind === 'metric' && <>
            <Field id="rule-metricName" label="Metric" wide>
              <input {...input('metricName')} list="rule-metrics" value={draft.metricName} required autocomplete="off" placeholder="e.g. http.server.duration" data-testid="rule-metric"
                onInput={(event) => {
                  // A metric seen in the last day brings its kind, and the kind its usual aggregation.
                  const name = event.currentTarget.value;
                  const known = metrics.data?.metrics.find((one) => one.name === name);
                  set(known ? { metricName: name, metricKind: known.kind, aggregation: AGGREGATIONS[known.kind][0]! } : { metricName: name });
                }} />
              <datalist id="rule-metrics">{metrics.data?.metrics.map((one) => <option key={`${one.name}/${one.kind}`} value={one.name} />)}</datalist>
            </Field>
            <Field id="rule-metricKind" label="Kind">
              <select {...input('metricKind')} value={draft.metricKind} onChange={(event) => { const kind = event.currentTarget.value as MetricKind; set({ metricKind: kind, aggregation: AGGREGATIONS[kind][0]! }); }} data-testid="rule-metric-kind">
                {Object.keys(AGGREGATIONS).map((kind) => <option key={kind} value={kind}>{kind}</option>)}
              </select>
            </Field>
            <Field id="rule-aggregation" label="Aggregation">
              <select {...input('aggregation')} value={draft.aggregation} onChange={text('aggregation')} data-testid="rule-aggregation">
                {AGGREGATIONS[draft.metricKind].map((one) => <option key={one} value={one}>{one}</option>)}
              </select>
            </Field>
            {service(true)}
          </>}
          {draft.kind === 'log_count' && <>
            <Field id="rule-logText" label="Text (optional)" wide>
              <input {...input('logText')} value={draft.logText} placeholder="e.g. timeout" onInput={text('logText')} data-testid="rule-log-text" />
            </Field>
            <Field id="rule-logServices" label="Services (optional)" hint="Comma-separated; empty: all.">
              <input {...input('logServices', true)} value={draft.logServices} placeholder={serviceNames.slice(0, 2).join(', ') || 'e.g. checkout, payment'} onInput={text('logServices')} data-testid="rule-log-services" />
            </Field>
            <Field id="rule-minSeverity" label="Least severity">
              <select {...input('minSeverity')} value={draft.minSeverity} onChange={text('minSeverity')} data-testid="rule-severity">
                <option value="">any</option>
                {SEVERITIES.slice(1).map(([number, name]) => <option key={number} value={String(number)}>{name} or above</option>)}
              </select>
            </Field>
          </>}
        </div>
        <div class="form-row">
          <Field id="rule-comparator" label="Is">
            <select {...input('comparator')} value={draft.comparator} onChange={text('comparator')} data-testid="rule-comparator">
              <option value="above">above</option>
              <option value="below">below</option>
            </select>
          </Field>
          <Field id="rule-threshold" label="Threshold" hint={THRESHOLD_HINTS[draft.kind]}>
            <input {...input('threshold', true)} type="number" step="any" required value={draft.threshold} onInput={text('threshold')} data-testid="rule-threshold" />
          </Field>
          <Field id="rule-windowSeconds" label="Over the last">
            <select {...input('windowSeconds')} value={draft.windowSeconds} onChange={text('windowSeconds')} data-testid="rule-window">
              {choices(WINDOWS, draft.windowSeconds, (s) => `${s / 60} min`).map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </Field>
          <Field id="rule-forSeconds" label="Firing after it holds for" hint="Pending meanwhile.">
            <select {...input('forSeconds', true)} value={draft.forSeconds} onChange={text('forSeconds')} data-testid="rule-for">
              {choices(FOR, draft.forSeconds, (s) => `${s / 60} min`).map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </Field>
          <Field id="rule-noData" label="A window without data">
            <select {...input('noData')} value={draft.noData} onChange={text('noData')} data-testid="rule-no-data">
              {NO_DATA.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </Field>
        </div>
      </fieldset>
      <fieldset>
        <legend>Notifications</legend>
        <div class="form-row">
          <Field id="rule-notify" label="Contact point" hint={contactPoints.error ? contactPoints.error : 'A relay form: its recipients and webhooks are told.'}>
            <select {...input('notify', true)} value={draft.notify} onChange={text('notify')} data-testid="rule-notify">
              <option value="">none</option>
              {contactPoints.data?.contactPoints.map((point) => <option key={notifyValue(point)} value={notifyValue(point)}>{point.siteName} / {point.formName}</option>)}
              {draft.notify && !contactPoints.data?.contactPoints.some((point) => notifyValue(point) === draft.notify) && <option value={draft.notify}>{draft.notify} (not an active form)</option>}
            </select>
          </Field>
          <Field id="rule-repeatSeconds" label="Remind while firing">
            <select {...input('repeatSeconds')} value={draft.repeatSeconds} onChange={text('repeatSeconds')} data-testid="rule-repeat">
              {choices(REPEATS, draft.repeatSeconds, (s) => `every ${s / 60} min`).map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </Field>
          <Field id="rule-labels" label="Labels (optional)" hint="key=value, comma-separated; silences match on them." wide>
            <input {...input('labels', true)} value={draft.labels} placeholder="e.g. team=payments, severity=page" onInput={text('labels')} data-testid="rule-labels" />
          </Field>
        </div>
        <label class="check">
          <input type="checkbox" checked={draft.enabled} onChange={(event) => set({ enabled: event.currentTarget.checked })} data-testid="rule-enabled" />
          Enabled: evaluated every round
        </label>
      </fieldset>
      <div class="form-actions">
        <button type="submit" class="primary" disabled={busy} data-testid="rule-submit">{submitLabel}</button>
        <button type="button" onClick={onCancel} data-testid="rule-cancel">Cancel</button>
        {refusal && <p class="note note-error form-refusal" id="rule-refusal" role="alert" data-testid="rule-refusal">{refusal.message}</p>}
      </div>
    </form>
  );
}
