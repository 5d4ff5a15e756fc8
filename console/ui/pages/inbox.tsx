/**
 * The development inbox (SLUICE_DELIVERY_INBOX): what delivery would have sent for the tenant,
 * newest first — each message's channel, destination, subject, time and text part. An email's
 * HTML part is shown in a sandboxed frame (no scripts, no same-origin, no navigation): it never
 * becomes markup of the console's own page.
 */
import { useState } from 'preact/hooks';
import type { InboxMessage } from '../../api.ts';
import { api } from '../api.ts';
import { ErrorNote, KeyValues, Loading } from '../components.tsx';
import { useLoad, useSession, useTitle } from '../hooks.ts';
import { formatAgo, formatDateTime } from '../time.ts';

const CHANNEL_NAMES: Record<InboxMessage['channel'], string> = { email: 'Email', whatsapp: 'WhatsApp', webhook: 'Webhook' };

/** What each channel would have put on the wire beside its text, as header-like lines. */
function details(message: InboxMessage): Record<string, string> {
  if (message.email) {
    const { from, replyTo, messageId, headers } = message.email;
    return {
      From: from ? (from.name ? `${from.name} <${from.address}>` : from.address) : '(none configured: SLUICE_SMTP_FROM or the tenant\'s email settings)',
      To: message.email.to,
      ...(replyTo ? { 'Reply-To': replyTo } : {}),
      'Message-ID': messageId,
      ...headers,
    };
  }
  if (message.whatsapp) {
    return { 'Cloud API': message.whatsapp.url ?? '(the tenant has no WhatsApp settings: its phone number id is unknown)', To: message.destination, Type: String(message.whatsapp.request.type ?? '') };
  }
  if (message.webhook) return { 'POST to': message.webhook.url, ...message.webhook.headers };
  return {};
}

/** An email's HTML part, in a frame made only once it is opened (a page of 100 messages loads none). */
function HtmlPart({ message }: { message: InboxMessage }) {
  const [open, setOpen] = useState(false);
  return (
    <details class="inbox-html" onToggle={(event) => setOpen((event.currentTarget as HTMLDetailsElement).open)}>
      <summary data-testid="inbox-html-toggle">HTML part, shown sandboxed (no scripts, nothing loaded from elsewhere)</summary>
      {/* sandbox first: the frame never runs scripts, shares no origin and cannot navigate the console. */}
      {open && <iframe sandbox="" referrerpolicy="no-referrer" srcdoc={message.html} title={`HTML part of the email to ${message.destination}`} data-testid="inbox-html" />}
    </details>
  );
}

function Message({ message }: { message: InboxMessage }) {
  const caught = Date.parse(message.caughtAt);
  const heading = message.subject || '(no subject)';
  return (
    <article class="card inbox-message" data-testid="inbox-message" aria-label={`${CHANNEL_NAMES[message.channel]} to ${message.destination}`}>
      <div class="card-head">
        <h2 class="card-title" data-testid="inbox-subject">{heading}</h2>
        <span class="muted small nowrap" title={formatDateTime(caught)} data-testid="inbox-time">{formatAgo(caught)}</span>
      </div>
      <p class="small">
        <span class="badge inbox-channel" data-testid="inbox-channel">{CHANNEL_NAMES[message.channel]}</span>{' '}
        to <strong data-testid="inbox-destination">{message.destination}</strong>
        <span class="muted"> · {message.kind.replace('_', ' ')} {message.submissionId && <code title="submission">{message.submissionId}</code>}</span>
      </p>
      <KeyValues values={details(message)} testid="inbox-details" />
      <h3>{message.channel === 'webhook' ? 'Body' : 'Text'}</h3>
      <pre class="inbox-text" data-testid="inbox-text">{message.text || '(empty)'}</pre>
      {message.html !== undefined && <HtmlPart message={message} />}
    </article>
  );
}

export function InboxPage() {
  useTitle('Inbox');
  const me = useSession();
  const inbox = useLoad(() => (me.deliveryInbox ? api.inbox() : Promise.resolve({ messages: [] })), [me.deliveryInbox]);
  if (!me.deliveryInbox) {
    return (
      <section class="empty" data-testid="inbox-off">
        <h1>Inbox</h1>
        <p>The development inbox is off: delivery sends email, WhatsApp messages and webhooks for real. Start Sluice with <code>SLUICE_DELIVERY_INBOX=true npm start</code> to keep them here instead, while you build.</p>
      </section>
    );
  }
  const messages = inbox.data?.messages ?? [];
  return (
    <>
      <div class="page-head">
        <h1>Inbox</h1>
        <div class="head-actions">
          <button type="button" class="small-button" onClick={inbox.reload} disabled={inbox.loading} data-testid="inbox-reload">Reload</button>
        </div>
      </div>
      <p class="callout" data-testid="inbox-note">
        <strong>Development inbox:</strong> nothing is sent. Every email, WhatsApp message and webhook of {me.tenant.name} is kept here as it would have been sent
        (the newest 1,000, for 7 days), and its delivery is recorded as delivered.
      </p>
      <ErrorNote error={inbox.error} />
      {inbox.loading && !inbox.data && <Loading />}
      {inbox.data && messages.length === 0 && (
        <section class="empty" data-testid="inbox-empty">
          <h2>Nothing yet</h2>
          <p>Submit one of your forms, or send a notification: what delivery would send shows up here a moment later.</p>
        </section>
      )}
      {messages.map((message) => <Message key={`${message.tenantId}:${message.seq}`} message={message} />)}
    </>
  );
}
