/**
 * The relay's tenant-wide settings in the console: API keys for backends (shown once, revoked
 * for good), the delivery settings (the tenant's own SMTP server and WhatsApp account: their
 * secrets are written, never shown again), and the message templates with a preview rendered by
 * the relay itself. Members read; admins and owners change.
 */
import { useState } from 'preact/hooks';
import { mayConfigure } from '../api.ts';
import { CodeBlock, ErrorNote, Loading, ReadOnlyNote } from '../components.tsx';
import { useChange, useLoad, useTitle } from '../hooks.ts';
import { relayApi, type RelayTemplate, type RenderedPreview } from '../relay-api.ts';
import { Link } from '../router.tsx';
import { formatAgo, formatDateTime } from '../time.ts';


function ApiKeys() {
  const keys = useLoad(() => relayApi.apiKeys(), []);
  const sites = useLoad(() => relayApi.sites(), []);
  const [siteId, setSiteId] = useState('');
  const [name, setName] = useState('');
  const [issued, setIssued] = useState<{ name: string; apiKey: string } | undefined>();
  const change = useChange(keys.reload);
  const siteName = (id: string) => sites.data?.find((site) => site.id === id)?.name ?? id;
  const create = async (event: Event) => {
    event.preventDefault();
    await change.run(async () => {
      const key = await relayApi.createApiKey(siteId || sites.data![0]!.id, name.trim());
      setIssued({ name: key.name, apiKey: key.apiKey });
      setName('');
    });
  };
  return (
    <section class="card" data-testid="api-keys">
      <h2 class="card-title">API keys</h2>
      <p class="muted small">Backends send notifications with a key of one site (<code>POST /api/v1/notifications</code>, docs/reference/relay.md).</p>
      {issued && (
        <div class="callout" data-testid="relay-key-issued" aria-live="polite">
          <div class="callout-head">
            <h3>API key {issued.name}</h3>
            <button type="button" class="small-button" onClick={() => setIssued(undefined)} data-testid="relay-key-close">Done</button>
          </div>
          <p><strong>Copy it now: it is shown this once.</strong> The relay keeps only its hash.</p>
          <CodeBlock text={issued.apiKey} testid="relay-key-value" copyTestid="relay-key-copy" />
        </div>
      )}
      <ErrorNote error={keys.error || change.error} />
      {keys.data && keys.data.length > 0 && (
        <ul class="plain-list">
          {keys.data.map((key) => (
            <li key={key.id} data-testid="relay-key-row">
              {key.name} · <code>{key.prefix}…</code> · {siteName(key.siteId)} · <span class="muted small" title={formatDateTime(Date.parse(key.createdAt))}>made {formatAgo(Date.parse(key.createdAt))}</span>{' '}
              {key.revokedAt ? <span class="badge">revoked</span> : mayConfigure() && (
                <button type="button" class="small-button danger" disabled={change.busy} onClick={() => change.run(() => relayApi.revokeApiKey(key.id))} data-testid="relay-key-revoke">Revoke</button>
              )}
            </li>
          ))}
        </ul>
      )}
      {mayConfigure() && sites.data && sites.data.length > 0 && (
        <form class="inline-form invite-form" onSubmit={create} data-testid="relay-key-form">
          <label class="field">Site
            <select value={siteId || sites.data[0]!.id} onChange={(event) => setSiteId(event.currentTarget.value)} data-testid="relay-key-site">
              {sites.data.map((site) => <option key={site.id} value={site.id}>{site.name}</option>)}
            </select>
          </label>
          <label class="field grow">Name
            <input required value={name} placeholder="orders backend" onInput={(event) => setName(event.currentTarget.value)} data-testid="relay-key-name" />
          </label>
          <button type="submit" class="primary" disabled={change.busy} data-testid="relay-key-create">Create key</button>
        </form>
      )}
      {sites.data && sites.data.length === 0 && <p class="muted">Make a site first: a key belongs to one.</p>}
    </section>
  );
}

function DeliverySettings() {
  const settings = useLoad(() => relayApi.deliverySettings(), []);
  const [from, setFrom] = useState('');
  const [smtpUrl, setSmtpUrl] = useState('');
  const [phoneNumberId, setPhoneNumberId] = useState('');
  const [token, setToken] = useState('');
  const change = useChange(settings.reload);
  const email = settings.data?.email;
  const whatsapp = settings.data?.whatsapp;
  const saveEmail = async (event: Event) => {
    event.preventDefault();
    if (await change.run(() => relayApi.putDeliverySettings({ email: { ...(from.trim() ? { from: from.trim() } : {}), ...(smtpUrl.trim() ? { smtpUrl: smtpUrl.trim() } : {}) } }))) setSmtpUrl('');
  };
  const saveWhatsapp = async (event: Event) => {
    event.preventDefault();
    if (await change.run(() => relayApi.putDeliverySettings({ whatsapp: { phoneNumberId: phoneNumberId.trim(), token } }))) setToken('');
  };
  return (
    <section class="card" data-testid="delivery-settings">
      <h2 class="card-title">Delivery</h2>
      {settings.loading && !settings.data && <Loading what="Loading the delivery settings" />}
      <ErrorNote error={settings.error || change.error} />
      {settings.data && (
        <>
          <p data-testid="delivery-email-state">
            Email: {email ? <>from {email.from ?? "the server's address"}, {email.smtpServerConfigured ? 'through your own SMTP server' : "through the server's SMTP server"}</> : "the server's SMTP server and address"}
            {email && mayConfigure() && <> <button type="button" class="small-button" disabled={change.busy} onClick={() => change.run(() => relayApi.putDeliverySettings({ email: null }))} data-testid="delivery-email-clear">Use the server's</button></>}
          </p>
          <p data-testid="delivery-whatsapp-state">
            WhatsApp: {whatsapp ? <>phone number id {whatsapp.phoneNumberId}, token set</> : 'not set up: WhatsApp recipients cannot be delivered'}
            {whatsapp && mayConfigure() && <> <button type="button" class="small-button" disabled={change.busy} onClick={() => change.run(() => relayApi.putDeliverySettings({ whatsapp: null }))} data-testid="delivery-whatsapp-clear">Remove</button></>}
          </p>
          {mayConfigure() && (
            <div class="two-columns">
              <form onSubmit={saveEmail} data-testid="delivery-email-form">
                <h3>Email</h3>
                <label class="field">From
                  <input value={from} placeholder="Acme Forms <forms@acme.example>" onInput={(event) => setFrom(event.currentTarget.value)} data-testid="delivery-from" />
                </label>
                <label class="field">Your SMTP server <span class="muted small">(kept sealed, never shown)</span>
                  <input type="password" autoComplete="off" value={smtpUrl} placeholder="smtps://user:password@smtp.acme.example:465" onInput={(event) => setSmtpUrl(event.currentTarget.value)} data-testid="delivery-smtp-url" />
                </label>
                <button type="submit" class="primary" disabled={change.busy || !(from.trim() || smtpUrl.trim())} data-testid="delivery-email-save">Save email</button>
              </form>
              <form onSubmit={saveWhatsapp} data-testid="delivery-whatsapp-form">
                <h3>WhatsApp Cloud API</h3>
                <label class="field">Phone number id
                  <input required inputMode="numeric" pattern="[0-9]{1,30}" value={phoneNumberId} onInput={(event) => setPhoneNumberId(event.currentTarget.value)} data-testid="delivery-phone-id" />
                </label>
                <label class="field">Access token <span class="muted small">(kept sealed, never shown)</span>
                  <input type="password" required minLength={10} autoComplete="off" value={token} onInput={(event) => setToken(event.currentTarget.value)} data-testid="delivery-token" />
                </label>
                <button type="submit" class="primary" disabled={change.busy} data-testid="delivery-whatsapp-save">Save WhatsApp</button>
              </form>
            </div>
          )}
        </>
      )}
    </section>
  );
}

const SAMPLE = JSON.stringify({ name: 'Ann', email: 'ann@example.com', message: 'Do you ship to Lisbon?' }, null, 2);
const NEW_TEMPLATE = { name: '', subject: 'New message from {{name}}', html: '<p>{{name}} ({{email}}) wrote:</p>\n<p>{{message}}</p>' };

function TemplateEditor({ editing, onDone }: { editing: RelayTemplate | undefined; onDone: () => void }) {
  const [fields, setFields] = useState(editing ? { name: editing.name, subject: editing.subject, html: editing.html } : NEW_TEMPLATE);
  const [sample, setSample] = useState(SAMPLE);
  const [preview, setPreview] = useState<RenderedPreview | undefined>();
  const change = useChange();
  const showPreview = () => change.run(async () => {
    let data: Record<string, unknown>;
    try {
      data = JSON.parse(sample) as Record<string, unknown>;
    } catch {
      throw new Error('The sample data is not JSON: write it as {"name": "Ann"}');
    }
    setPreview(await relayApi.preview({ subject: fields.subject, html: fields.html, data }));
  });
  const save = async (event: Event) => {
    event.preventDefault();
    if (await change.run(() => (editing ? relayApi.saveTemplate(editing.id, fields) : relayApi.createTemplate(fields)))) onDone();
  };
  return (
    <form class="template-editor" onSubmit={save} data-testid="template-editor">
      <h3>{editing ? `Edit ${editing.name}` : 'New template'}</h3>
      <label class="field">Name
        <input required value={fields.name} onInput={(event) => setFields({ ...fields, name: event.currentTarget.value })} data-testid="template-name" />
      </label>
      <label class="field">Subject
        <input required value={fields.subject} onInput={(event) => setFields({ ...fields, subject: event.currentTarget.value })} data-testid="template-subject" />
      </label>
      <label class="field">HTML <span class="muted small">(<code>{'{{field}}'}</code> puts a field of the submission in, escaped)</span>
        <textarea required rows={6} value={fields.html} onInput={(event) => setFields({ ...fields, html: event.currentTarget.value })} data-testid="template-html" />
      </label>
      <label class="field">Sample data for the preview
        <textarea rows={4} value={sample} onInput={(event) => setSample(event.currentTarget.value)} data-testid="template-sample" />
      </label>
      <div class="filter-actions">
        <button type="button" disabled={change.busy} onClick={showPreview} data-testid="template-preview">Preview</button>
        <button type="submit" class="primary" disabled={change.busy} data-testid="template-save">Save template</button>
        <button type="button" onClick={onDone}>Cancel</button>
      </div>
      <ErrorNote error={change.error} testid="template-error" />
      {preview && (
        <div class="preview" data-testid="template-preview-result">
          <p><strong>Subject:</strong> <span data-testid="preview-subject">{preview.subject}</span></p>
          {/* The relay's own rendering, in a frame that runs no script and reaches nothing. */}
          <iframe title="The message as HTML" sandbox="" srcDoc={preview.html} data-testid="preview-html" />
          <details><summary>Plain text</summary><pre data-testid="preview-text">{preview.text}</pre></details>
        </div>
      )}
    </form>
  );
}

function Templates() {
  const templates = useLoad(() => relayApi.templates(), []);
  const [editing, setEditing] = useState<RelayTemplate | 'new' | undefined>();
  const change = useChange(templates.reload);
  const edit = (id: string) => change.run(async () => setEditing(await relayApi.template(id)));
  return (
    <section class="card" data-testid="templates">
      <h2 class="card-title">Message templates</h2>
      <p class="muted small">What a form's email says (choose one on the form's page); without one, a plain listing of the fields.</p>
      <ErrorNote error={templates.error || change.error} />
      {templates.data && templates.data.templates.length > 0 && (
        <ul class="plain-list">
          {templates.data.templates.map((one) => (
            <li key={one.id} data-testid="template-row">
              <strong>{one.name}</strong> · {one.subject}{' '}
              {mayConfigure() && <>
                <button type="button" class="small-button" disabled={change.busy} onClick={() => edit(one.id)} data-testid="template-edit">Edit</button>{' '}
                <button type="button" class="small-button danger" disabled={change.busy} onClick={() => change.run(() => relayApi.deleteTemplate(one.id))} data-testid="template-delete">Delete</button>
              </>}
            </li>
          ))}
        </ul>
      )}
      {mayConfigure() && !editing && <button type="button" onClick={() => setEditing('new')} data-testid="template-new">New template</button>}
      {editing && <TemplateEditor key={editing === 'new' ? 'new' : editing.id} editing={editing === 'new' ? undefined : editing} onDone={() => { setEditing(undefined); templates.reload(); }} />}
    </section>
  );
}

export function RelaySettingsPage() {
  useTitle('Relay settings');
  return (
    <>
      <p class="crumbs"><Link href="/relay">Relay</Link> /</p>
      <div class="page-head"><h1>Relay settings</h1></div>
      {!mayConfigure() && <ReadOnlyNote />}
      <ApiKeys />
      <DeliverySettings />
      <Templates />
    </>
  );
}
