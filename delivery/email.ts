/**
 * The email channel: one attempt to hand one rendered message to the site's SMTP server,
 * answered as an AttemptOutcome (delivery/channel.ts).
 *
 * - One pooled nodemailer transport per distinct transport settings, reused across sends and
 *   closed after it has been idle for a while.
 * - Nothing from a submission reaches a header unchecked: the recipient and the sender must each
 *   be one clean address (else the attempt is refused before any connection), the subject loses
 *   its line breaks, a Reply-To that is not one plain address is left out, and the SMTP envelope
 *   is set explicitly to the one recipient, so no header can add another.
 * - The server's reply decides the outcome: 5xx permanent (but 503, a session-state reply),
 *   4xx transient, no reply (refused connection, timeout, TLS failure) transient, a refused
 *   login permanent (but a 4xx one, such as 454).
 */
import { createHash } from 'node:crypto';
import { convert as htmlToText } from 'html-to-text';
import nodemailer, { type NodemailerError, type SendMailOptions, type SMTPPoolOptions, type SMTPPoolSentMessageInfo, type Transporter } from 'nodemailer';
import { isEmailAddress } from '../core/email-address.ts';
import { redactUrl } from '../core/redact.ts';
import { clip, type AttemptOutcome, type RenderedMessage } from './channel.ts';

/** How one site's mail leaves: its SMTP server, its sender address, and how hard to push. */
export interface SmtpSettings {
  /** smtp://user:pass@host:port or smtps://... (implicit TLS); STARTTLS is used when the server offers it unless requireTls. */
  url: string;
  /** Envelope and header From: one plain address, or 'Name <addr>'. */
  from: string;
  /** Pooled connections and messages per connection. */
  maxConnections: number;
  maxMessagesPerConnection: number;
  /** Messages per second over this transport (nodemailer's rateDelta/rateLimit), 0 = unlimited. */
  ratePerSecond: number;
  /** Refuse to send unless the session is encrypted (STARTTLS on smtp://). Default false. */
  requireTls?: boolean;
  /** Accept self-signed certificates (tests, on-premises). Default false. */
  tlsInsecure?: boolean;
  /** Deadline for connecting and for the server's greeting. Default 30 000 ms. */
  connectionTimeoutMs?: number;
  /** Sign every message with this key (relaxed/relaxed, rsa-sha256). */
  dkim?: { domainName: string; keySelector: string; privateKey: string };
}

/** Who one message goes to and how it is identified. */
export interface EmailAddressing {
  /** One plain address; anything else is refused (permanent) without sending. */
  to: string;
  /** The Message-ID header, `<left@right>`, stable across attempts of one job so receivers can de-duplicate. */
  messageId: string;
  /** Written as `X-Sluice-Job`, so a received message leads back to its job. */
  jobId: string;
}

/** A warn-level logger (pino's shape). */
export interface EmailSenderLog {
  warn(obj: object, msg: string): void;
}

/** A transport unused this long is closed; the next send opens a new one. */
const DEFAULT_IDLE_TRANSPORT_MS = 5 * 60_000;
/** nodemailer waits 2 minutes by default: too long to hold a delivery slot for a dead server. */
const DEFAULT_CONNECTION_TIMEOUT_MS = 30_000;
/** providerId is an identifier, not a transcript. */
const MAX_PROVIDER_ID_CHARS = 200;

/** Any C0 control character or DEL: nothing a header value may hold. */
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
/** A msg-id as the worker builds it: `<left@right>`, visible ASCII, no brackets or spaces inside. */
const MESSAGE_ID = /^<[\x21-\x3b\x3d\x3f-\x7e]+@[\x21-\x3b\x3d\x3f-\x7e]+>$/;
const JOB_ID = /^[\x21-\x7e]{1,200}$/;
/** Dot-separated labels of letters, digits, '-' and '_' (selectors may use '_'). */
const DNS_NAME = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*$/;

/** Exactly one address, no display name, no list, no CR/LF: the one rule of core/email-address.ts. */
export const isPlainEmailAddress = isEmailAddress;

export interface MailboxAddress {
  name: string;
  address: string;
}

/** 'addr' or 'Name <addr>' (the name optionally quoted); undefined for anything else. */
export function parseMailbox(value: string): MailboxAddress | undefined {
  if (CONTROL_CHARS.test(value)) return undefined;
  const trimmed = value.trim();
  if (isPlainEmailAddress(trimmed)) return { name: '', address: trimmed };
  const match = /^([^<>]*)<([^<>]*)>$/.exec(trimmed);
  if (!match || !isPlainEmailAddress(match[2])) return undefined;
  // Handed to nodemailer as an object: it quotes and encodes the name, so a comma stays text.
  return { name: match[1].trim().replace(/^"(.*)"$/, '$1'), address: match[2] };
}

/** d= and s= go into the DKIM-Signature header: DNS names only. */
function isCleanDkimIdentity(dkim: NonNullable<SmtpSettings['dkim']>): boolean {
  return DNS_NAME.test(dkim.domainName) && DNS_NAME.test(dkim.keySelector);
}

/** Line breaks become spaces and other control characters go: a header value is one line. */
function oneLine(value: string): string {
  return value.replace(/[\r\n]+/g, ' ').replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '');
}

interface SmtpEndpoint {
  host: string;
  port: number;
  secure: boolean;
  auth?: { user: string; pass: string };
}

/**
 * Reads the URL here rather than letting nodemailer do it: nodemailer would apply query
 * parameters as transport options (`?tls.rejectUnauthorized=false`), over the settings.
 */
function parseSmtpUrl(url: string): SmtpEndpoint | { problem: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { problem: 'the SMTP URL does not parse' };
  }
  const secure = parsed.protocol === 'smtps:';
  if (!secure && parsed.protocol !== 'smtp:') return { problem: `the SMTP URL's scheme is ${parsed.protocol}, not smtp: or smtps:` };
  if (!parsed.hostname) return { problem: 'the SMTP URL names no host' };
  if (parsed.search || parsed.hash) return { problem: 'the SMTP URL has a query or fragment: options belong in the settings' };
  let auth: SmtpEndpoint['auth'];
  try {
    if (parsed.username || parsed.password) auth = { user: decodeURIComponent(parsed.username), pass: decodeURIComponent(parsed.password) };
  } catch {
    return { problem: 'the SMTP URL has a malformed %-escape in its credentials' };
  }
  return {
    host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'),
    // The submission ports, as nodemailer defaults them.
    port: parsed.port ? Number(parsed.port) : secure ? 465 : 587,
    secure,
    ...(auth ? { auth } : {}),
  };
}

/** nodemailer's limiter counts whole messages per window: pick a window that gives the rate. */
function rateWindow(ratePerSecond: number): Pick<SMTPPoolOptions, 'rateLimit' | 'rateDelta'> {
  if (!(ratePerSecond > 0)) return {};
  const rateLimit = Math.max(1, Math.round(ratePerSecond));
  return { rateLimit, rateDelta: Math.round((1000 * rateLimit) / ratePerSecond) };
}

/** Positive integer or the fallback, so a bad number cannot disable a pool limit. */
function atLeastOne(value: number, fallback: number): number {
  return Number.isFinite(value) && value >= 1 ? Math.floor(value) : fallback;
}

function transportOptions(settings: SmtpSettings, endpoint: SmtpEndpoint): SMTPPoolOptions & { pool: true } {
  const timeout = settings.connectionTimeoutMs ?? DEFAULT_CONNECTION_TIMEOUT_MS;
  return {
    pool: true,
    ...endpoint,
    requireTLS: settings.requireTls === true,
    tls: { rejectUnauthorized: settings.tlsInsecure !== true },
    connectionTimeout: timeout,
    greetingTimeout: timeout,
    maxConnections: atLeastOne(settings.maxConnections, 1),
    maxMessages: atLeastOne(settings.maxMessagesPerConnection, 100),
    ...rateWindow(settings.ratePerSecond),
    ...(settings.dkim ? { dkim: { ...settings.dkim } } : {}),
    // Bodies are strings we rendered: never a path or URL for nodemailer to read.
    disableFileAccess: true,
    disableUrlAccess: true,
    // One job, one recipient: a message that somehow names more fails instead of fanning out.
    maxRecipients: 1,
    logger: false,
  };
}

/** Everything that shapes the transport; the From address is per message and stays out. */
function transportKey(settings: SmtpSettings): string {
  const { url, maxConnections, maxMessagesPerConnection, ratePerSecond, requireTls, tlsInsecure, connectionTimeoutMs, dkim } = settings;
  const dkimKey = dkim ? [dkim.domainName, dkim.keySelector, dkim.privateKey] : null;
  const shape = [url, maxConnections, maxMessagesPerConnection, ratePerSecond, requireTls === true, tlsInsecure === true, connectionTimeoutMs ?? null, dkimKey];
  // Hashed: the key holds credentials and the private key, the map need not.
  return createHash('sha256').update(JSON.stringify(shape)).digest('hex');
}

interface PooledTransport {
  key: string;
  transport: Transporter<SMTPPoolSentMessageInfo, SMTPPoolOptions>;
  /** The URL without credentials, for log lines. */
  server: string;
  sending: number;
  idleTimer?: NodeJS.Timeout;
}

/** Sends rendered messages over pooled SMTP transports. */
export class EmailSender {
  private readonly transports = new Map<string, PooledTransport>();
  private readonly inFlight = new Set<Promise<AttemptOutcome>>();
  private readonly log: EmailSenderLog;
  private readonly idleTransportMs: number;
  private closed = false;

  /** `idleTransportMs`: how long an unused transport stays open (default 5 minutes). */
  constructor(options: { log?: EmailSenderLog; idleTransportMs?: number } = {}) {
    this.log = options.log ?? { warn: () => {} };
    this.idleTransportMs = options.idleTransportMs ?? DEFAULT_IDLE_TRANSPORT_MS;
  }

  /**
   * One attempt to send `message` to `addressing.to`. Never rejects for the server's or the
   * address's fault; rejects only for a malformed messageId or jobId (the caller's bug).
   */
  send(settings: SmtpSettings, addressing: EmailAddressing, message: RenderedMessage): Promise<AttemptOutcome> {
    // Our own identifiers: a bad one is a bug upstream, not a reason to dead-letter the job.
    if (!MESSAGE_ID.test(addressing.messageId)) {
      return Promise.reject(new TypeError(`messageId must be <left@right>, got ${JSON.stringify(addressing.messageId)}`));
    }
    if (!JOB_ID.test(addressing.jobId)) {
      return Promise.reject(new TypeError(`jobId must be 1-200 visible ASCII characters, got ${JSON.stringify(addressing.jobId)}`));
    }
    const attempt = this.attempt(settings, addressing, message);
    this.inFlight.add(attempt);
    const forget = () => this.inFlight.delete(attempt);
    attempt.then(forget, forget);
    return attempt;
  }

  /** Closes every pooled transport and waits for the sends under way to finish. */
  async close(): Promise<void> {
    this.closed = true;
    for (const pooled of [...this.transports.values()]) this.retire(pooled, true);
    await Promise.allSettled([...this.inFlight]);
  }

  private async attempt(settings: SmtpSettings, addressing: EmailAddressing, message: RenderedMessage): Promise<AttemptOutcome> {
    if (this.closed) return { kind: 'transient', error: 'the email sender is shut down', providerStatus: 'smtp not sent' };
    if (!isPlainEmailAddress(addressing.to)) {
      return refused(`the recipient is not one plain email address: ${JSON.stringify(clip(addressing.to, 100))}`, 'smtp invalid address');
    }
    const from = parseMailbox(settings.from);
    if (!from) return refused(`the sender is not one email address: ${JSON.stringify(clip(settings.from, 100))}`, 'smtp invalid address');
    const endpoint = parseSmtpUrl(settings.url);
    if ('problem' in endpoint) return refused(endpoint.problem, 'smtp invalid settings');
    if (settings.dkim && !isCleanDkimIdentity(settings.dkim)) {
      return refused('the DKIM domain or selector is not a plain DNS name', 'smtp invalid settings');
    }

    const pooled = this.acquire(settings, endpoint);
    try {
      const info = await pooled.transport.sendMail(composeMail(from, addressing, message));
      return sentOutcome(info);
    } catch (err) {
      const outcome = err instanceof Error ? failureOutcome(err as NodemailerError) : undefined;
      if (outcome) return outcome;
      // close() fails what the pool had queued, with no code: not the server's doing.
      if (this.closed) return { kind: 'transient', error: 'the email sender shut down before the message went', providerStatus: 'smtp not sent' };
      this.log.warn({ err, server: pooled.server }, 'email: unrecognised SMTP failure, retried as transient');
      return { kind: 'transient', error: clip(describe(err)), providerStatus: 'smtp error' };
    } finally {
      this.release(pooled);
    }
  }

  private acquire(settings: SmtpSettings, endpoint: SmtpEndpoint): PooledTransport {
    const key = transportKey(settings);
    let pooled = this.transports.get(key);
    if (!pooled) {
      const transport = nodemailer.createTransport(transportOptions(settings, endpoint));
      const server = redactUrl(settings.url);
      // The pool reports per send; an 'error' event without a listener would crash the process.
      transport.on('error', (err: Error) => this.log.warn({ err, server }, 'email: SMTP transport error'));
      pooled = { key, transport, server, sending: 0 };
      this.transports.set(key, pooled);
    }
    clearTimeout(pooled.idleTimer);
    pooled.sending += 1;
    return pooled;
  }

  private release(pooled: PooledTransport): void {
    pooled.sending -= 1;
    if (pooled.sending > 0 || this.transports.get(pooled.key) !== pooled) return;
    pooled.idleTimer = setTimeout(() => this.retire(pooled, false), this.idleTransportMs);
    // An idle pool must not keep the process alive.
    pooled.idleTimer.unref();
  }

  /** Closes one transport; unless `evenIfBusy`, only when no send is using it. */
  private retire(pooled: PooledTransport, evenIfBusy: boolean): void {
    if (!evenIfBusy && pooled.sending > 0) return;
    clearTimeout(pooled.idleTimer);
    if (this.transports.get(pooled.key) === pooled) this.transports.delete(pooled.key);
    // Without force: a delivery under way finishes, then its connection closes.
    pooled.transport.close();
  }
}

function composeMail(from: MailboxAddress, addressing: EmailAddressing, message: RenderedMessage): SendMailOptions {
  const replyTo = message.replyTo !== undefined && isPlainEmailAddress(message.replyTo) ? message.replyTo : undefined;
  return {
    from,
    to: { name: '', address: addressing.to },
    // Set, not derived from the headers: exactly this sender and this one recipient.
    envelope: { from: from.address, to: [addressing.to] },
    subject: oneLine(message.subject),
    html: message.html,
    text: message.text.trim() ? message.text : htmlToText(message.html, { wordwrap: 78 }),
    ...(replyTo ? { replyTo: { name: '', address: replyTo } } : {}),
    messageId: addressing.messageId,
    headers: { 'X-Sluice-Job': addressing.jobId },
  };
}

function refused(error: string, providerStatus: string): AttemptOutcome {
  return { kind: 'permanent', error, providerStatus };
}

/** The reply code at the start of an SMTP reply, if there is one. */
function replyCode(response: string | undefined): number | undefined {
  const match = /^(\d{3})\b/.exec(response ?? '');
  return match ? Number(match[1]) : undefined;
}

/** The server took the message; a recipient it refused anyway decides like a failure would. */
function sentOutcome(info: SMTPPoolSentMessageInfo): AttemptOutcome {
  if (info.rejected.length > 0) {
    const refusal = info.rejectedErrors?.[0];
    return (refusal && failureOutcome(refusal)) ?? refused(`the server refused ${info.rejected.join(', ')}`, 'smtp rejected');
  }
  const response = info.response ?? '';
  // Postfix and most relays: "queued as ID"; Exim: "id=ID". Else the reply itself identifies it.
  const queueId = /\bqueued as\s+(\S+)/i.exec(response)?.[1] ?? /\bid=(\S+)/i.exec(response)?.[1];
  const providerId = info.serverMessageId ?? queueId ?? response;
  return { kind: 'delivered', providerStatus: `smtp ${replyCode(response) ?? 250}`, ...(providerId ? { providerId: clip(providerId, MAX_PROVIDER_ID_CHARS) } : {}) };
}

/** Failures before any reply: the server or the path to it, worth another try later. */
const CONNECTION_FAILURES = new Set([
  'ECONNECTION', 'ETIMEDOUT', 'ESOCKET', 'EDNS', 'ETLS', 'EPROXY', 'EMAXLIMIT',
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
]);
/** Failures the same message and settings would meet again. */
const SETTLED_FAILURES = new Set(['EENVELOPE', 'EMESSAGE', 'EMAXRECIPIENTS', 'ECONFIG']);

/** The outcome a nodemailer error stands for, or undefined when it is not one we know. */
function failureOutcome(err: NodemailerError): AttemptOutcome | undefined {
  // One recipient per message: its refusal is the answer, whatever DATA got after it.
  const replied = err.rejectedErrors?.find((refusal) => refusal.responseCode) ?? err;
  const code = replied.responseCode ?? replyCode(replied.response);
  if (code !== undefined && code >= 400) {
    const error = clip(replied.response ?? replied.message);
    // 503 is "bad sequence of commands": the session's state, not the message (nodemailer's
    // isPermanentResponseCode agrees). A 4xx login failure (454) is the server's trouble too.
    const permanent = code >= 500 && code !== 503;
    return permanent ? { kind: 'permanent', error, providerStatus: `smtp ${code}` } : { kind: 'transient', error, providerStatus: `smtp ${code}` };
  }
  const kind = err.code ?? '';
  if (CONNECTION_FAILURES.has(kind) || CONNECTION_FAILURES.has(err.originalCode ?? '')) {
    return { kind: 'transient', error: clip(err.message), providerStatus: 'smtp connection' };
  }
  // A login the server refused without a reply code, or credentials it needs and we lack.
  if (kind === 'EAUTH' || kind === 'ENOAUTH') return { kind: 'permanent', error: clip(err.message), providerStatus: 'smtp auth' };
  if (SETTLED_FAILURES.has(kind)) return { kind: 'permanent', error: clip(err.message), providerStatus: 'smtp refused' };
  return undefined;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
