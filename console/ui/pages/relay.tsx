/**
 * The relay's sites and forms in the console (its admin API through `/api/relay/…`): the sites
 * with their allowed origins, a site's forms, and a form's recipients, webhooks (the signing
 * secret shown once, at creation and at rotation), submissions (searched by text) and delivery
 * jobs (dead first, each with its attempts, retried one by one or all at once). Members read;
 * admins and owners change.
 */
import { useState } from 'preact/hooks';
import { mayConfigure, problem } from '../api.ts';
import { CodeBlock, ErrorNote, Loading, ReadOnlyNote } from '../components.tsx';
import { useChange, useLoad, useSession, useTitle } from '../hooks.ts';
import { formSnippet, scriptLiteral } from '../../../core/form-snippet.ts';
import { relayApi, type CaptchaProvider, type RelayForm, type RelayJob, type RelayRecipient, type RelaySite } from '../relay-api.ts';
import { Link, type Place } from '../router.tsx';
import { formatAgo, formatDateTime } from '../time.ts';

const ms = (iso: string) => Date.parse(iso);


/** Origins typed one per line or separated by commas. */
const originsOf = (text: string) => text.split(/[\s,]+/).map((one) => one.trim()).filter(Boolean);

export function RelayPage() {
  useTitle('Relay');
  const sites = useLoad(() => relayApi.sites(), []);
  const [name, setName] = useState('');
  const [origins, setOrigins] = useState('');
  const { busy, error, run } = useChange(sites.reload);
  const create = async (event: Event) => {
    event.preventDefault();
    if (await run(() => relayApi.createSite(name.trim(), originsOf(origins)))) {
      setName('');
      setOrigins('');
    }
  };
  return (
    <>
      <div class="page-head"><h1>Relay</h1><Link href="/relay/settings" data-testid="relay-settings-link">API keys, delivery and templates</Link></div>
      <p class="muted">Web forms and backend notifications, delivered by email, WhatsApp and signed webhooks. A site names the origins its pages post from; its forms name who gets each submission.</p>
      {mayConfigure() ? (
        <form class="card inline-form invite-form" onSubmit={create} data-testid="site-create-form">
          <label class="field">Site name
            <input required value={name} onInput={(event) => setName(event.currentTarget.value)} data-testid="site-name" />
          </label>
          <label class="field grow">Allowed origins
            <input value={origins} placeholder="https://www.example.com" onInput={(event) => setOrigins(event.currentTarget.value)} data-testid="site-origins" />
          </label>
          <button type="submit" class="primary" disabled={busy} data-testid="site-create">Create site</button>
        </form>
      ) : <ReadOnlyNote />}
      <ErrorNote error={error || sites.error} />
      {sites.loading && !sites.data && <Loading what="Loading sites" />}
      {sites.data && sites.data.length === 0 && <section class="empty" data-testid="sites-empty"><p>No sites yet.</p></section>}
      {sites.data && sites.data.length > 0 && (
        <table class="table" data-testid="sites-table">
          <thead><tr><th>Site</th><th>Site key</th><th>Allowed origins</th><th>Status</th></tr></thead>
          <tbody>
            {sites.data.map((site) => (
              <tr key={site.id} data-testid="site-row">
                <td><Link href={`/relay/sites/${site.id}`} data-testid="site-link">{site.name}</Link></td>
                <td><code>{site.siteKey}</code></td>
                <td>{site.allowedOrigins.join(', ') || <span class="muted">none: backends only</span>}</td>
                <td>{site.active ? 'Active' : <span class="muted">Off</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function SiteSettings({ site, onSaved }: { site: RelaySite; onSaved: () => void }) {
  const [origins, setOrigins] = useState(site.allowedOrigins.join('\n'));
  const { busy, error, run } = useChange(onSaved);
  const save = (event: Event) => {
    event.preventDefault();
    void run(() => relayApi.updateSite(site.id, { allowedOrigins: originsOf(origins) }));
  };
  return (
    <section class="card">
      <h2 class="card-title">Site</h2>
      <dl class="fields">
        <dt>Site key</dt><dd><code data-testid="site-key">{site.siteKey}</code> <span class="muted small">(public: pages send it with each submission)</span></dd>
        <dt>Status</dt><dd>{site.active ? 'Active' : 'Off: submissions are refused'}</dd>
        <dt>CAPTCHA</dt><dd data-testid="site-captcha">{site.captcha ? `${PROVIDER_NAMES[site.captcha.provider as CaptchaProvider] ?? site.captcha.provider}, site key ${site.captcha.siteKey}${site.captcha.secretConfigured ? '' : ' (no secret: submissions refused)'}` : 'none'}</dd>
      </dl>
      {mayConfigure() && (
        <form onSubmit={save} data-testid="site-origins-form">
          <label class="field">Allowed origins, one per line
            <textarea rows={3} value={origins} onInput={(event) => setOrigins(event.currentTarget.value)} data-testid="site-origins-edit" />
          </label>
          <div class="filter-actions">
            <button type="submit" class="primary" disabled={busy} data-testid="site-origins-save">Save origins</button>
            <button type="button" disabled={busy} onClick={() => run(() => relayApi.updateSite(site.id, { active: !site.active }))} data-testid="site-active">{site.active ? 'Turn off' : 'Turn on'}</button>
          </div>
        </form>
      )}
      <ErrorNote error={error} />
      {mayConfigure() && <CaptchaForm site={site} onSaved={onSaved} />}
    </section>
  );
}

const PROVIDER_NAMES: Record<CaptchaProvider, string> = { recaptcha_v2: 'reCAPTCHA v2', recaptcha_v3: 'reCAPTCHA v3', hcaptcha: 'hCaptcha', turnstile: 'Cloudflare Turnstile' };

/** The site's CAPTCHA: provider and keys (the secret written, never shown), or none. */
function CaptchaForm({ site, onSaved }: { site: RelaySite; onSaved: () => void }) {
  const [provider, setProvider] = useState<CaptchaProvider>((site.captcha?.provider as CaptchaProvider | undefined) ?? 'turnstile');
  const [siteKey, setSiteKey] = useState(site.captcha?.siteKey ?? '');
  const [secret, setSecret] = useState('');
  const { busy, error, run } = useChange(onSaved);
  const save = (event: Event) => {
    event.preventDefault();
    void run(() => relayApi.setCaptcha(site.id, { provider, siteKey: siteKey.trim(), ...(secret ? { secret } : {}) }));
  };
  return (
    <form class="inline-form invite-form" onSubmit={save} data-testid="captcha-form">
      <label class="field">CAPTCHA
        <select value={provider} onChange={(event) => setProvider(event.currentTarget.value as CaptchaProvider)} data-testid="captcha-provider">
          {(Object.keys(PROVIDER_NAMES) as CaptchaProvider[]).map((one) => <option key={one} value={one}>{PROVIDER_NAMES[one]}</option>)}
        </select>
      </label>
      <label class="field">Its site key
        <input required value={siteKey} onInput={(event) => setSiteKey(event.currentTarget.value)} data-testid="captcha-site-key" />
      </label>
      <label class="field">Its secret <span class="muted small">{site.captcha?.secretConfigured ? '(set: leave empty to keep it)' : '(kept sealed)'}</span>
        <input type="password" autoComplete="off" required={!site.captcha?.secretConfigured} value={secret} onInput={(event) => setSecret(event.currentTarget.value)} data-testid="captcha-secret" />
      </label>
      <button type="submit" disabled={busy} data-testid="captcha-save">Save CAPTCHA</button>
      {site.captcha && <button type="button" class="danger" disabled={busy} onClick={() => run(() => relayApi.removeCaptcha(site.id))} data-testid="captcha-remove">Remove CAPTCHA</button>}
      <ErrorNote error={error} />
    </form>
  );
}

export function SitePage({ params }: { place: Place; params: Record<string, string> }) {
  const siteId = params.siteId!;
  const site = useLoad(() => relayApi.site(siteId), [siteId]);
  const forms = useLoad(() => relayApi.forms(siteId), [siteId]);
  useTitle(site.data ? `${site.data.name} · Relay` : 'Relay');
  const [name, setName] = useState('');
  const [formKey, setFormKey] = useState('');
  const { busy, error, run } = useChange(forms.reload);
  const create = async (event: Event) => {
    event.preventDefault();
    if (await run(() => relayApi.createForm(siteId, name.trim(), formKey.trim()))) {
      setName('');
      setFormKey('');
    }
  };
  return (
    <>
      <p class="crumbs"><Link href="/relay">Relay</Link> /</p>
      <div class="page-head"><h1>{site.data?.name ?? 'Site'}</h1></div>
      <ErrorNote error={site.error || forms.error || error} />
      {site.data && <SiteSettings key={site.data.id + site.data.allowedOrigins.join()} site={site.data} onSaved={site.reload} />}
      <section class="card">
        <h2 class="card-title">Forms</h2>
        {forms.data && forms.data.length === 0 && <p class="muted" data-testid="forms-empty">No forms yet.</p>}
        {forms.data && forms.data.length > 0 && (
          <table class="table" data-testid="forms-table">
            <thead><tr><th>Form</th><th>Form key</th><th>Recipients</th><th>Webhooks</th><th>Status</th></tr></thead>
            <tbody>
              {forms.data.map((form) => (
                <tr key={form.id} data-testid="form-row">
                  <td><Link href={`/relay/sites/${siteId}/forms/${form.id}`} data-testid="form-link">{form.name}</Link></td>
                  <td><code>{form.formKey}</code></td>
                  <td>{form.recipients.filter((one) => one.active).length}</td>
                  <td>{form.webhooks.filter((one) => one.active).length}</td>
                  <td>{form.active ? 'Active' : <span class="muted">Off</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {mayConfigure() && (
          <form class="inline-form invite-form" onSubmit={create} data-testid="form-create-form">
            <label class="field">Form name
              <input required value={name} onInput={(event) => setName(event.currentTarget.value)} data-testid="form-name" />
            </label>
            <label class="field">Form key <span class="muted small">(optional)</span>
              <input value={formKey} pattern="[A-Za-z0-9_\-]+" onInput={(event) => setFormKey(event.currentTarget.value)} data-testid="form-key" />
            </label>
            <button type="submit" class="primary" disabled={busy} data-testid="form-create">Create form</button>
          </form>
        )}
      </section>
    </>
  );
}

function Recipients({ form, change }: { form: RelayForm; change: ReturnType<typeof useChange> }) {
  const [channel, setChannel] = useState<RelayRecipient['channel']>('email');
  const [address, setAddress] = useState('');
  const add = async (event: Event) => {
    event.preventDefault();
    if (await change.run(() => relayApi.addRecipient(form.siteId, form.id, channel, address.trim()))) setAddress('');
  };
  return (
    <section class="card" data-testid="recipients">
      <h2 class="card-title">Recipients</h2>
      {form.recipients.length === 0 ? <p class="muted">No one yet: submissions are stored, and go to the webhooks.</p> : (
        <ul class="plain-list">
          {form.recipients.map((one) => (
            <li key={one.id} data-testid="recipient-row">
              <span class="badge">{one.channel}</span> {one.address}{!one.active && <span class="muted"> (off)</span>}{' '}
              {mayConfigure() && <button type="button" class="small-button danger" disabled={change.busy} onClick={() => change.run(() => relayApi.removeRecipient(form.siteId, form.id, one.id))} data-testid="recipient-remove">Remove</button>}
            </li>
          ))}
        </ul>
      )}
      {mayConfigure() && (
        <form class="inline-form invite-form" onSubmit={add} data-testid="recipient-form">
          <label class="field">Channel
            <select value={channel} onChange={(event) => setChannel(event.currentTarget.value as RelayRecipient['channel'])} data-testid="recipient-channel">
              <option value="email">Email</option>
              <option value="whatsapp">WhatsApp</option>
            </select>
          </label>
          <label class="field grow">{channel === 'email' ? 'Email address' : 'Phone number (+491511234567)'}
            <input required value={address} onInput={(event) => setAddress(event.currentTarget.value)} data-testid="recipient-address" />
          </label>
          <button type="submit" class="primary" disabled={change.busy} data-testid="recipient-add">Add</button>
        </form>
      )}
    </section>
  );
}

function Webhooks({ form, change }: { form: RelayForm; change: ReturnType<typeof useChange> }) {
  const [url, setUrl] = useState('');
  const [secret, setSecret] = useState<{ url: string; secret: string; rotated: boolean } | undefined>();
  const add = async (event: Event) => {
    event.preventDefault();
    await change.run(async () => {
      const hook = await relayApi.addWebhook(form.siteId, form.id, url.trim());
      setSecret({ url: hook.url, secret: hook.secret, rotated: false });
      setUrl('');
    });
  };
  const rotate = (id: string) => change.run(async () => {
    const hook = await relayApi.rotateWebhook(form.siteId, form.id, id);
    setSecret({ url: hook.url, secret: hook.secret, rotated: true });
  });
  return (
    <section class="card" data-testid="webhooks">
      <h2 class="card-title">Webhooks</h2>
      {secret && (
        <div class="callout" data-testid="webhook-secret" aria-live="polite">
          <div class="callout-head">
            <h3>Signing secret of {secret.url}</h3>
            <button type="button" class="small-button" onClick={() => setSecret(undefined)} data-testid="webhook-secret-close">Done</button>
          </div>
          <p><strong>Copy it now: it is shown this once.</strong> Calls carry Standard Webhooks signatures made with it.{secret.rotated && ' The old secret signs them too for 24 hours.'}</p>
          <CodeBlock text={secret.secret} testid="webhook-secret-value" copyTestid="webhook-secret-copy" />
        </div>
      )}
      {form.webhooks.length === 0 ? <p class="muted">None.</p> : (
        <ul class="plain-list">
          {form.webhooks.map((hook) => (
            <li key={hook.id} data-testid="webhook-row">
              <code>{hook.url}</code>{!hook.active && <span class="muted"> (off)</span>}
              {hook.previousSecretUntil && Date.parse(hook.previousSecretUntil) > Date.now() && <span class="muted small"> · old secret signs too until {formatDateTime(ms(hook.previousSecretUntil))}</span>}{' '}
              {mayConfigure() && <>
                <button type="button" class="small-button" disabled={change.busy} onClick={() => rotate(hook.id)} data-testid="webhook-rotate">Rotate secret</button>{' '}
                <button type="button" class="small-button danger" disabled={change.busy} onClick={() => change.run(() => relayApi.removeWebhook(form.siteId, form.id, hook.id))} data-testid="webhook-remove">Remove</button>
              </>}
            </li>
          ))}
        </ul>
      )}
      {mayConfigure() && (
        <form class="inline-form invite-form" onSubmit={add} data-testid="webhook-form">
          <label class="field grow">URL
            <input type="url" required value={url} placeholder="https://example.com/hooks/sluice" onInput={(event) => setUrl(event.currentTarget.value)} data-testid="webhook-url" />
          </label>
          <button type="submit" class="primary" disabled={change.busy} data-testid="webhook-add">Add webhook</button>
        </form>
      )}
    </section>
  );
}

function Submissions({ form }: { form: RelayForm }) {
  const [draft, setDraft] = useState('');
  const [q, setQ] = useState('');
  const [pages, setPages] = useState<string[]>([]);
  const first = useLoad(() => relayApi.submissions(form.siteId, form.id, { q }), [form.id, q]);
  const [more, setMore] = useState<{ items: Awaited<ReturnType<typeof relayApi.submissions>>['submissions']; next?: string; error: string }>({ items: [], error: '' });
  const next = pages.length > 0 ? more.next : first.data?.nextBefore;
  const loadMore = async () => {
    try {
      const page = await relayApi.submissions(form.siteId, form.id, { q, ...(next ? { before: next } : {}) });
      setMore((old) => ({ items: [...old.items, ...page.submissions], ...(page.nextBefore ? { next: page.nextBefore } : {}), error: '' }));
      setPages((old) => [...old, next ?? '']);
    } catch (err) {
      setMore((old) => ({ ...old, error: problem(err) }));
    }
  };
  const search = (event: Event) => {
    event.preventDefault();
    setPages([]);
    setMore({ items: [], error: '' });
    setQ(draft.trim());
  };
  const items = [...(first.data?.submissions ?? []), ...more.items];
  return (
    <section class="card" data-testid="submissions">
      <h2 class="card-title">Submissions</h2>
      <form class="inline-form invite-form" onSubmit={search} role="search">
        <label class="field grow">Search
          <input type="search" value={draft} placeholder="Text in the data, subject or message" onInput={(event) => setDraft(event.currentTarget.value)} data-testid="submissions-search" />
        </label>
        <button type="submit" data-testid="submissions-search-submit">Search</button>
      </form>
      <ErrorNote error={first.error || more.error} />
      {first.data && items.length === 0 && <p class="muted" data-testid="submissions-empty">{q ? 'No submission holds this text.' : 'No submissions yet.'}</p>}
      {items.length > 0 && (
        <table class="table" data-testid="submissions-table">
          <thead><tr><th>Received</th><th>Data</th><th>From</th><th>Jobs</th></tr></thead>
          <tbody>
            {items.map((one) => (
              <tr key={one.submissionId} data-testid="submission-row">
                <td class="nowrap" title={formatDateTime(ms(one.receivedAt))}>{formatAgo(ms(one.receivedAt))}</td>
                <td class="message"><code>{JSON.stringify(one.data)}</code></td>
                <td class="small">{one.meta.origin || 'a backend'}</td>
                <td>{one.jobs}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {next && <button type="button" class="load-more" onClick={loadMore} data-testid="submissions-more">Load more</button>}
    </section>
  );
}

const STATE_CLASS: Record<RelayJob['state'], string> = { dead: 'sev sev-error', failed: 'sev sev-warn', sending: 'sev sev-info', queued: 'sev sev-debug', delivered: 'sev', withdrawn: 'sev sev-debug' };

function JobAttempts({ jobId }: { jobId: string }) {
  const job = useLoad(() => relayApi.job(jobId), [jobId]);
  if (job.error) return <ErrorNote error={job.error} />;
  if (!job.data) return <Loading what="Loading attempts" />;
  // Each attempt is recorded as it starts (sending) and as it ends: its last record says how.
  const last = new Map(job.data.attempts.map((one) => [`${one.series}-${one.attempt}`, one]));
  return (
    <ol class="attempts" data-testid="job-attempts">
      {[...last.values()].map((one) => (
        <li key={`${one.series}-${one.attempt}`}>
          series {one.series}, attempt {one.attempt}: {one.state} {formatAgo(ms(one.at))} ({one.durationMs} ms){one.error && <> · <span class="sev-error">{one.error}</span></>}{one.providerStatus && <> · {one.providerStatus}</>}
        </li>
      ))}
    </ol>
  );
}

function Jobs({ form }: { form: RelayForm }) {
  const jobs = useLoad(() => relayApi.jobs(form.siteId, form.id), [form.id]);
  const [open, setOpen] = useState<string | undefined>();
  const [note, setNote] = useState('');
  const change = useChange(jobs.reload);
  const dead = (jobs.data?.jobs ?? []).filter((job) => job.state === 'dead').length;
  return (
    <section class="card" data-testid="jobs">
      <div class="callout-head">
        <h2 class="card-title">Delivery jobs</h2>
        <div>
          <button type="button" class="small-button" onClick={jobs.reload} data-testid="jobs-refresh">Refresh</button>{' '}
          {mayConfigure() && dead > 0 && (
            <button type="button" class="small-button" disabled={change.busy} data-testid="jobs-retry-dead"
              onClick={() => change.run(async () => { const { retried, more } = await relayApi.retryDead(form.siteId, form.id); setNote(`${retried} dead ${retried === 1 ? 'job' : 'jobs'} queued again${more ? '; there are more: retry again' : ''}.`); })}>
              Retry all {dead} dead
            </button>
          )}
        </div>
      </div>
      {note && <p role="status" data-testid="jobs-note">{note}</p>}
      <ErrorNote error={jobs.error || change.error} />
      {jobs.data && jobs.data.jobs.length === 0 && <p class="muted">No deliveries yet.</p>}
      {jobs.data && jobs.data.jobs.length > 0 && (
        <table class="table" data-testid="jobs-table">
          <thead><tr><th>State</th><th>Channel</th><th>To</th><th>Attempts</th><th>Last error</th><th>Created</th><th><span class="visually-hidden">Actions</span></th></tr></thead>
          <tbody>
            {jobs.data.jobs.map((job) => (
              <>
                <tr key={job.jobId} data-testid="job-row" data-state={job.state}>
                  <td><span class={STATE_CLASS[job.state]}>{job.state}</span></td>
                  <td>{job.channel}</td>
                  <td class="small"><code>{job.destination}</code></td>
                  <td><button type="button" class="link-button" aria-expanded={open === job.jobId} onClick={() => setOpen(open === job.jobId ? undefined : job.jobId)} data-testid="job-attempts-toggle">{job.attempts}{job.series > 1 && ` (series ${job.series})`}</button></td>
                  <td class="small">{job.lastError || '–'}</td>
                  <td class="nowrap small" title={formatDateTime(ms(job.createdAt))}>{formatAgo(ms(job.createdAt))}</td>
                  <td>{mayConfigure() && job.state === 'dead' && <button type="button" class="small-button" disabled={change.busy} onClick={() => change.run(() => relayApi.retryJob(job.jobId))} data-testid="job-retry">Retry</button>}</td>
                </tr>
                {open === job.jobId && <tr key={`${job.jobId}-attempts`}><td colSpan={7}><JobAttempts jobId={job.jobId} /></td></tr>}
              </>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** Which template the form's messages are made with (Relay settings has them). */
function TemplateChoice({ form, change }: { form: RelayForm; change: ReturnType<typeof useChange> }) {
  const templates = useLoad(() => relayApi.templates(), []);
  const chosen = templates.data?.templates.find((one) => one.id === form.templateId);
  if (!mayConfigure()) return <p>Message: {chosen ? chosen.name : 'the plain listing of the fields'}</p>;
  return (
    <p>
      <label class="field inline-field">Message template{' '}
        <select value={form.templateId ?? ''} disabled={change.busy || !templates.data} onChange={(event) => change.run(() => relayApi.setFormTemplate(form.siteId, form.id, event.currentTarget.value || null))} data-testid="form-template">
          <option value="">The plain listing of the fields</option>
          {templates.data?.templates.map((one) => <option key={one.id} value={one.id}>{one.name}</option>)}
        </select>
      </label>{' '}
      <Link href="/relay/settings" class="small">Templates…</Link>
    </p>
  );
}

/** The HTML to paste into a page of an allowed origin, with this relay, site and form filled in. */
function Embed({ form, site }: { form: RelayForm; site: RelaySite }) {
  const relay = useSession().relay;
  if (!relay) return null;
  return (
    <section class="card" data-testid="embed">
      <h2 class="card-title">Embed this form</h2>
      <p class="muted small">
        Paste it into a page of {site.allowedOrigins.length > 0 ? site.allowedOrigins.join(', ') : 'an allowed origin (add one to the site first)'}; style it as you like.
        Backends send notifications with an API key instead (docs/reference/relay.md).
      </p>
      <CodeBlock text={formSnippet({ relay: scriptLiteral(relay.url), siteKey: scriptLiteral(site.siteKey), formKey: scriptLiteral(form.formKey) })} testid="embed-snippet" copyTestid="embed-copy" />
    </section>
  );
}

export function FormPage({ params }: { place: Place; params: Record<string, string> }) {
  const { siteId, formId } = params as { siteId: string; formId: string };
  const form = useLoad(() => relayApi.form(siteId, formId), [siteId, formId]);
  const site = useLoad(() => relayApi.site(siteId), [siteId]);
  useTitle(form.data ? `${form.data.name} · Relay` : 'Relay');
  const change = useChange(form.reload);
  return (
    <>
      <p class="crumbs"><Link href="/relay">Relay</Link> / <Link href={`/relay/sites/${siteId}`}>{site.data?.name ?? 'Site'}</Link> /</p>
      <div class="page-head">
        <h1>{form.data?.name ?? 'Form'}</h1>
        {form.data && mayConfigure() && (
          <button type="button" disabled={change.busy} onClick={() => change.run(() => relayApi.updateForm(siteId, formId, { active: !form.data!.active }))} data-testid="form-active">
            {form.data.active ? 'Turn off' : 'Turn on'}
          </button>
        )}
      </div>
      <ErrorNote error={form.error || change.error} />
      {!mayConfigure() && <ReadOnlyNote />}
      {form.data && (
        <>
          <p data-testid="form-status">
            Form key <code>{form.data.formKey}</code> · {form.data.active ? 'Active: takes submissions' : 'Off: submissions are refused'}
          </p>
          <TemplateChoice form={form.data} change={change} />
          <div class="two-columns">
            <Recipients form={form.data} change={change} />
            <Webhooks form={form.data} change={change} />
          </div>
          <Jobs form={form.data} />
          <Submissions form={form.data} />
          {site.data && <Embed form={form.data} site={site.data} />}
        </>
      )}
    </>
  );
}
