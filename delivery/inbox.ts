/**
 * The development inbox (SLUICE_DELIVERY_INBOX=true; the embedded default only, config.ts refuses
 * it with NATS_URL): a dispatch that sends nothing. Each attempt's message, as the channel's sender
 * would hand it over — the email's headers and parts (delivery/email.ts#mailFields), the Cloud
 * API's request body (whatsapp.ts#buildSendRequest), the webhook's signed headers and body
 * (webhook.ts#webhookHeaders) — is kept in the state store, and the attempt is delivered with a
 * providerStatus that says where it went. What a real sender refuses before sending (a recipient
 * that is not one address, a bad signing secret) is refused here too, in the same words.
 *
 * Bounded per tenant: the newest INBOX_LIMITS.messages messages of at most INBOX_LIMITS.bytes
 * together (the newest is always kept; each is within the renderer's size limit already), each
 * for INBOX_LIMITS.days. A tenant's index (its sequence and its messages' sizes) is moved by
 * compare-and-set; each message is an entry of its own, so a listing reads only what it shows.
 */
import type { MailboxAddress } from './email.ts';
import { mailFields, parseMailbox, refusedRecipient, refusedSender } from './email.ts';
import type { AttemptOutcome } from './channel.ts';
import type { DeliveryChannel, DeliveryJob, JobKind } from './job.ts';
import { badSecret, webhookHeaders } from './webhook.ts';
import { buildSendRequest, messagesUrl, refusedNumber } from './whatsapp.ts';
import type { Dispatch, Outgoing } from './worker.ts';
import type { StateStore } from '../state/store.ts';

/** How much the inbox keeps of each tenant's messages, and for how long. */
export const INBOX_LIMITS = { messages: 1000, bytes: 64 * 1024 * 1024, days: 7 } as const;

/** The attempt's providerStatus: the history says where the message went. */
export const CAUGHT_STATUS = 'caught by the development inbox (SLUICE_DELIVERY_INBOX): not sent';

/** The most one listing returns. */
export const MAX_INBOX_PAGE = 1000;

const MESSAGES = 'delivery_inbox';
const INDEXES = 'delivery_inbox_index';
/** What a kept message holds beside its text and HTML parts, at most (ids, headers, a WhatsApp request's copy of the text). */
const MESSAGE_OVERHEAD_BYTES = 8 * 1024;
/** Concurrent attempts of one tenant move its index by compare-and-set: a loser reads again. */
const INDEX_WRITE_TRIES = 50;

/** One message kept instead of sent, as the admin API, the CLI and the console show it. */
export interface InboxMessage {
  /** Per tenant, counting up: the newest has the highest. */
  seq: number;
  /** Empty for tenant discovery emails (they belong to no tenant). */
  tenantId: string;
  channel: DeliveryChannel;
  /** The email address, the WhatsApp number, or the webhook's URL. */
  destination: string;
  /** ISO time the attempt was made. */
  caughtAt: string;
  jobId: string;
  series: number;
  kind: JobKind;
  submissionId: string;
  siteId: string;
  formId: string;
  /** The email's Subject header; a WhatsApp message's rendered subject; a webhook's event type. */
  subject: string;
  /** The email's text part; the text the WhatsApp message carries; the webhook's JSON body. */
  text: string;
  /** The email's HTML part (HTML: show it as text or in a sandboxed frame, never as markup of a page). */
  html?: string;
  /** The email's headers as they would be sent; `from` is null when no From is configured. */
  email?: { from: MailboxAddress | null; to: string; replyTo: string | null; messageId: string; headers: Record<string, string> };
  /** The Cloud API request; `url` is null when the tenant has no WhatsApp settings (nothing would know where to send it). */
  whatsapp?: { url: string | null; request: Record<string, unknown> };
  /** The webhook's URL and signed headers (its body is `text`). */
  webhook?: { url: string; headers: Record<string, string> };
}

/** A tenant's index: the next sequence number, and the messages kept, oldest first. */
interface InboxIndex {
  next: number;
  entries: Array<{ seq: number; at: number; bytes: number }>;
}

export interface DevelopmentInboxOptions {
  state: StateStore;
  /** Counts what was kept, by channel (sluice_delivery_inbox_messages_total). */
  onKept?: (channel: DeliveryChannel) => void;
  limits?: { messages: number; bytes: number; days: number };
  now?: () => number;
}

export interface InboxQuery {
  /** One tenant's messages; all tenants' (the operator's listing) when undefined. */
  tenantId?: string;
  limit: number;
}

/** The tenant's index key: tenant discovery emails belong to no tenant. */
const indexKey = (tenantId: string) => tenantId || '_';
const messageKey = (tenantId: string, seq: number) => `${indexKey(tenantId)}.${seq}`;

export class DevelopmentInbox implements Dispatch {
  private readonly state: StateStore;
  private readonly limits: { messages: number; bytes: number; days: number };
  private readonly now: () => number;

  constructor(private readonly options: DevelopmentInboxOptions) {
    this.state = options.state;
    this.limits = options.limits ?? INBOX_LIMITS;
    this.now = options.now ?? Date.now;
    this.state.expireAfter(MESSAGES, this.ttlMs());
    this.state.expireAfter(INDEXES, this.ttlMs());
  }

  /** Keeps the attempt's message instead of sending it: delivered, unless a sender would have refused it too. */
  async dispatch(job: DeliveryJob, outgoing: Outgoing): Promise<AttemptOutcome> {
    const kept = asSent(outgoing);
    if ('kind' in kept) return kept;
    const message: Omit<InboxMessage, 'seq'> = {
      tenantId: job.tenantId,
      channel: outgoing.channel,
      caughtAt: new Date(this.now()).toISOString(),
      jobId: job.id,
      series: job.series,
      kind: job.kind,
      submissionId: job.submissionId,
      siteId: job.siteId,
      formId: job.formId,
      ...kept,
    };
    await this.keep(message);
    this.options.onKept?.(outgoing.channel);
    return { kind: 'delivered', providerStatus: CAUGHT_STATUS };
  }

  /** The newest messages first (of one tenant, or of all). */
  async list(query: InboxQuery): Promise<InboxMessage[]> {
    const indexes: Array<[string, InboxIndex | undefined]> = query.tenantId !== undefined
      ? [[query.tenantId, await this.state.get<InboxIndex>(INDEXES, indexKey(query.tenantId))]]
      : (await this.state.list<InboxIndex>(INDEXES)).map(([key, index]) => [key === '_' ? '' : key, index]);
    const oldest = this.now() - this.ttlMs();
    const entries: Array<{ tenantId: string; seq: number; at: number }> = [];
    for (const [tenantId, index] of indexes) {
      for (const entry of index?.entries ?? []) if (entry.at > oldest) entries.push({ tenantId, seq: entry.seq, at: entry.at });
    }
    entries.sort((a, b) => b.at - a.at || b.seq - a.seq);
    const newest = entries.slice(0, Math.max(0, Math.min(query.limit, MAX_INBOX_PAGE)));
    const messages = await Promise.all(newest.map(({ tenantId, seq }) => this.state.get<InboxMessage>(MESSAGES, messageKey(tenantId, seq))));
    // A message whose index entry was written but not itself (a crash between the two) is not shown.
    return messages.filter((message): message is InboxMessage => message !== undefined);
  }

  private ttlMs(): number {
    return this.limits.days * 24 * 60 * 60 * 1000;
  }

  /** Takes the tenant's next place (dropping the oldest past the caps), then writes the message there. */
  private async keep(message: Omit<InboxMessage, 'seq'>): Promise<void> {
    const key = indexKey(message.tenantId);
    const at = this.now();
    // Its parts, and room for the headers and ids: close enough for a cap of megabytes, and no
    // second serialisation of a message of up to 8,000,000 characters on the event loop.
    const bytes = Buffer.byteLength(message.text) + Buffer.byteLength(message.html ?? '') + MESSAGE_OVERHEAD_BYTES;
    for (let tries = 0; tries < INDEX_WRITE_TRIES; tries++) {
      const current = await this.state.getVersioned<InboxIndex>(INDEXES, key);
      const index = current?.value ?? { next: 1, entries: [] };
      const seq = index.next;
      const entries = [...index.entries.filter((entry) => entry.at > at - this.ttlMs()), { seq, at, bytes }];
      let total = entries.reduce((sum, entry) => sum + entry.bytes, 0);
      // The newest stays whatever its size: it is within the renderer's limit.
      while (entries.length > this.limits.messages || (total > this.limits.bytes && entries.length > 1)) total -= entries.shift()!.bytes;
      const next: InboxIndex = { next: seq + 1, entries };
      const written = current ? await this.state.update(INDEXES, key, next, current.revision) : await this.state.create(INDEXES, key, next);
      if (written === undefined) continue;
      await this.state.put(MESSAGES, messageKey(message.tenantId, seq), { seq, ...message });
      const kept = new Set(entries.map((entry) => entry.seq));
      for (const dropped of index.entries) if (!kept.has(dropped.seq)) await this.state.delete(MESSAGES, messageKey(message.tenantId, dropped.seq));
      return;
    }
    throw new Error(`the development inbox could not take a place for tenant ${message.tenantId || '(none)'}: ${INDEX_WRITE_TRIES} concurrent writers won first`);
  }
}

type AsSent = Pick<InboxMessage, 'destination' | 'subject' | 'text' | 'html' | 'email' | 'whatsapp' | 'webhook'>;

/** The message as its sender would hand it over, or the sender's own refusal of it. */
function asSent(outgoing: Outgoing): AsSent | AttemptOutcome {
  switch (outgoing.channel) {
    case 'email': {
      const { settings, addressing, message } = outgoing;
      const badRecipient = refusedRecipient(addressing.to);
      if (badRecipient) return badRecipient;
      // Nothing is sent, so no From need be configured; one that is must be one mailbox, as for the sender.
      const from = settings.from ? parseMailbox(settings.from) : undefined;
      if (settings.from && !from) return refusedSender(settings.from);
      const mail = mailFields(from, addressing, message);
      return {
        destination: addressing.to,
        subject: mail.subject,
        text: mail.text ?? '',
        html: mail.html,
        email: { from: mail.from ?? null, to: mail.to.address, replyTo: mail.replyTo?.address ?? null, messageId: mail.messageId, headers: mail.headers },
      };
    }
    case 'whatsapp': {
      const { settings, to, message } = outgoing;
      const badNumber = refusedNumber(to);
      if (badNumber) return badNumber;
      const request = buildSendRequest(settings, to.slice(1), message);
      const url = settings.phoneNumberId ? (messagesUrl(settings)?.href ?? null) : null;
      return { destination: to, subject: message.subject, text: whatsAppText(request), whatsapp: { url, request } };
    }
    case 'webhook': {
      const { target, delivery } = outgoing;
      const signed = webhookHeaders(target, delivery);
      if ('problem' in signed) return badSecret(signed.problem);
      return { destination: target.url, subject: eventType(delivery.body), text: delivery.body, webhook: { url: target.url, headers: signed.headers } };
    }
  }
}

/** The text a Cloud API request carries: a text message's body, or a template's one parameter. */
function whatsAppText(request: Record<string, unknown>): string {
  const text = request.text as { body?: unknown } | undefined;
  if (typeof text?.body === 'string') return text.body;
  const template = request.template as { components?: Array<{ parameters?: Array<{ text?: unknown }> }> } | undefined;
  const parameter = template?.components?.[0]?.parameters?.[0]?.text;
  return typeof parameter === 'string' ? parameter : '';
}

/** A webhook body's `type` (submission.created, notification.created). */
function eventType(body: string): string {
  try {
    const type = (JSON.parse(body) as { type?: unknown }).type;
    return typeof type === 'string' ? type : '';
  } catch {
    return '';
  }
}
