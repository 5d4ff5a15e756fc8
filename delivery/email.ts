/**
 * The email channel: one attempt to hand one rendered message to the site's SMTP server,
 * answered as an AttemptOutcome (delivery/channel.ts).
 *
 * - One pooled nodemailer transport per distinct transport settings, reused across sends and
 *   closed after it has been idle for a while.
 * - A tenant's SMTP server is a destination the tenant aims: every connection to it goes
 *   through the egress policy and to the address it approved (delivery/smtp-socket.ts). Only
 *   the operator's own server (`operatorServer`) is connected to as configured.
 * - Every attempt has a deadline, time queued in the pool included; past it the attempt is
 *   transient and its message is withdrawn from the pool, or its connection closed, so it does
 *   not go out later behind the next attempt (but for a server that had taken it whole and not
 *   yet said so: the same Message-ID then). A silent server is dropped sooner.
 * - Nothing from a submission reaches a header unchecked: the recipient and the sender must each
 *   be one clean address (else the attempt is refused before any connection), the subject loses
 *   its line breaks, a Reply-To that is not one plain address is left out, and the SMTP envelope
 *   is set explicitly to the one recipient, so no header can add another.
 * - The outcome and its error, in our words: delivery/smtp-outcome.ts.
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type net from 'node:net';
import nodemailer, { type NodemailerError, type SendMailOptions, type SMTPPoolOptions, type SMTPPoolSentMessageInfo, type Transporter } from 'nodemailer';
import { emailDomain, isEmailAddress } from '../core/email-address.ts';
import { redactUrl } from '../core/redact.ts';
import { clip, type AttemptOutcome, type RenderedMessage } from './channel.ts';
import { connectToApproved, type ConnectOptions, type EgressPolicy } from './egress.ts';
import { pacedBody } from './paced-body.ts';
import { failureOutcome, sentOutcome } from './smtp-outcome.ts';
import { checkedSocket } from './smtp-socket.ts';

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
  /** Accept self-signed certificates (the operator's on-premises relay). Default false. */
  tlsInsecure?: boolean;
  /**
   * The operator's own server (SLUICE_SMTP_URL), the operator's choice: connected to as
   * configured. Default false: the egress policy checks every connection.
   */
  operatorServer?: boolean;
  /** Deadline for connecting, for the server's greeting, and for any silence of the server after it. Default 30 000 ms, at most timeoutMs. */
  connectionTimeoutMs?: number;
  /** The whole attempt, waiting for a pooled connection included. Default 60 000 ms. */
  timeoutMs?: number;
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
/** nodemailer waits 2 minutes to connect and 10 minutes for a silent server: too long to hold a delivery slot. */
const DEFAULT_CONNECTION_TIMEOUT_MS = 30_000;
const DEFAULT_ATTEMPT_TIMEOUT_MS = 60_000;
const SILENCE_AFTER_GREETING_DEADLINE_MS = 250;
/** The most of a server's reply an operator's log line carries. */
const LOGGED_REPLY_CHARS = 200;

/** Body parts longer than this go to nodemailer as a paced stream (bodyPart). */
const STREAMED_PART_CHARS = 64 * 1024;
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

/**
 * Whether `from` ('addr' or 'Name <addr>') is an address of one of `domains` (exactly that
 * domain, any case): a From a transport other than the tenant's own may send as.
 */
export function isFromInDomains(from: string, domains: readonly string[]): boolean {
  const mailbox = parseMailbox(from);
  if (!mailbox) return false;
  const domain = emailDomain(mailbox.address);
  return domains.some((allowed) => allowed.toLowerCase() === domain);
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

/** The attempt's deadline, and the shorter one for connecting, the greeting and silence. */
function timeouts(settings: SmtpSettings): { attemptMs: number; connectionMs: number } {
  const attemptMs = settings.timeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
  return { attemptMs, connectionMs: Math.min(settings.connectionTimeoutMs ?? DEFAULT_CONNECTION_TIMEOUT_MS, attemptMs) };
}

function transportOptions(settings: SmtpSettings, endpoint: SmtpEndpoint, getSocket: SMTPPoolOptions['getSocket']): SMTPPoolOptions & { pool: true } {
  const timeout = timeouts(settings).connectionMs;
  return {
    pool: true,
    ...endpoint,
    ...(getSocket ? { getSocket } : {}),
    requireTLS: settings.requireTls === true,
    tls: { rejectUnauthorized: settings.tlsInsecure !== true },
    connectionTimeout: timeout,
    greetingTimeout: timeout,
    // Inactivity: nodemailer's default is 10 minutes of a server saying nothing. Armed just
    // before the greeting's timer, and with the same length it would fire first when the two
    // tie: later, so that a server that never greets is named for the greeting.
    socketTimeout: timeout + SILENCE_AFTER_GREETING_DEADLINE_MS,
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

/** Everything that shapes the transport; the From address and the attempt's deadline are per message and stay out. */
function transportKey(settings: SmtpSettings): string {
  const { url, maxConnections, maxMessagesPerConnection, ratePerSecond, requireTls, tlsInsecure, operatorServer, dkim } = settings;
  const dkimKey = dkim ? [dkim.domainName, dkim.keySelector, dkim.privateKey] : null;
  const shape = [url, maxConnections, maxMessagesPerConnection, ratePerSecond, requireTls === true, tlsInsecure === true, operatorServer === true, timeouts(settings).connectionMs, dkimKey];
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

/** What an EmailSender is given: the egress policy is required, so no tenant transport goes unchecked. */
export interface EmailSenderOptions {
  /** Checks every connection to a server other than the operator's (delivery/egress.ts). */
  egress: EgressPolicy;
  /** Opens a tenant transport's socket to the approved address (tests inject one). Default net.connect. */
  connect?: (options: ConnectOptions) => net.Socket;
  log?: EmailSenderLog;
  /** How long an unused transport stays open. Default 5 minutes. */
  idleTransportMs?: number;
}

/** Sends rendered messages over pooled SMTP transports. */
export class EmailSender {
  private readonly transports = new Map<string, PooledTransport>();
  private readonly inFlight = new Set<Promise<AttemptOutcome>>();
  private readonly egress: EgressPolicy;
  private readonly connect: (options: ConnectOptions) => net.Socket;
  private readonly log: EmailSenderLog;
  private readonly idleTransportMs: number;
  private closed = false;

  constructor(options: EmailSenderOptions) {
    this.egress = options.egress;
    this.connect = options.connect ?? connectToApproved;
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
    const badRecipient = refusedRecipient(addressing.to);
    if (badRecipient) return badRecipient;
    const from = parseMailbox(settings.from);
    if (!from) return refusedSender(settings.from);
    const endpoint = parseSmtpUrl(settings.url);
    if ('problem' in endpoint) return refused(endpoint.problem, 'smtp invalid settings');
    if (settings.dkim && !isCleanDkimIdentity(settings.dkim)) {
      return refused('the DKIM domain or selector is not a plain DNS name', 'smtp invalid settings');
    }

    const pooled = this.acquire(settings, endpoint);
    const { attemptMs } = timeouts(settings);
    // Aborting withdraws the message from the pool's queue, or closes the connection sending it.
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), attemptMs);
    try {
      const info = await pooled.transport.sendMail({ ...composeMail(from, addressing, message), signal: deadline.signal });
      return sentOutcome(info);
    } catch (err) {
      if (deadline.signal.aborted) return { kind: 'transient', error: `smtp: no answer within ${attemptMs} ms: taken back, or its connection closed (a server that had it whole may still deliver it, under the same Message-ID)`, providerStatus: 'smtp timeout' };
      const outcome = err instanceof Error ? failureOutcome(err as NodemailerError) : undefined;
      if (outcome) {
        this.logReply(err as NodemailerError, pooled, outcome);
        return outcome;
      }
      // close() fails what the pool had queued, with no code: not the server's doing.
      if (this.closed) return { kind: 'transient', error: 'the email sender shut down before the message went', providerStatus: 'smtp not sent' };
      this.log.warn({ err: clipped(err), server: pooled.server }, 'email: unrecognised SMTP failure, retried as transient');
      return { kind: 'transient', error: 'smtp: an unrecognised failure (the operator\'s log has it)', providerStatus: 'smtp error' };
    } finally {
      clearTimeout(timer);
      this.release(pooled);
    }
  }

  /** The server's own words stay in the operator's log, clipped; the tenant sees ours. */
  private logReply(err: NodemailerError, pooled: PooledTransport, outcome: AttemptOutcome): void {
    if (!err.response) return;
    this.log.warn({ server: pooled.server, providerStatus: outcome.providerStatus, reply: clip(err.response, LOGGED_REPLY_CHARS) }, 'email: the SMTP server refused');
  }

  private acquire(settings: SmtpSettings, endpoint: SmtpEndpoint): PooledTransport {
    const key = transportKey(settings);
    let pooled = this.transports.get(key);
    if (!pooled) {
      const getSocket = settings.operatorServer
        ? undefined
        : checkedSocket({ egress: this.egress, connect: this.connect, url: settings.url, port: endpoint.port, connectionTimeoutMs: timeouts(settings).connectionMs });
      const transport = nodemailer.createTransport(transportOptions(settings, endpoint, getSocket));
      const server = redactUrl(settings.url);
      // The pool reports per send; an 'error' event without a listener would crash the process.
      transport.on('error', (err: Error) => this.log.warn({ err: clipped(err), server }, 'email: SMTP transport error'));
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

/**
 * The message as nodemailer is given it, its parts as strings: the one place that decides its
 * headers and parts, for the sender and for the development inbox (delivery/inbox.ts), which
 * keeps what would be sent. `from` is absent only in the inbox, where no From need be configured.
 */
export interface MailFields {
  from?: MailboxAddress;
  to: MailboxAddress;
  envelope: { from?: string; to: string[] };
  subject: string;
  html: string;
  text?: string;
  replyTo?: MailboxAddress;
  messageId: string;
  headers: Record<string, string>;
}

export function mailFields(from: MailboxAddress | undefined, addressing: EmailAddressing, message: RenderedMessage): MailFields {
  const replyTo = message.replyTo !== undefined && isPlainEmailAddress(message.replyTo) ? message.replyTo : undefined;
  return {
    ...(from ? { from } : {}),
    to: { name: '', address: addressing.to },
    // Set, not derived from the headers: exactly this sender and this one recipient.
    envelope: { ...(from ? { from: from.address } : {}), to: [addressing.to] },
    subject: oneLine(message.subject),
    html: message.html,
    ...(message.text.trim() ? { text: message.text } : {}),
    ...(replyTo ? { replyTo: { name: '', address: replyTo } } : {}),
    messageId: addressing.messageId,
    headers: { 'X-Sluice-Job': addressing.jobId },
  };
}

/** A recipient that is not one plain address is refused before anything is sent (or kept): the same words everywhere. */
export function refusedRecipient(to: string): AttemptOutcome | undefined {
  return isPlainEmailAddress(to) ? undefined : refused(`the recipient is not one plain email address: ${JSON.stringify(clip(to, 100))}`, 'smtp invalid address');
}

/** A From that is not one mailbox is refused the same way. */
export function refusedSender(from: string): AttemptOutcome {
  return refused(`the sender is not one email address: ${JSON.stringify(clip(from, 100))}`, 'smtp invalid address');
}

function composeMail(from: MailboxAddress, addressing: EmailAddressing, message: RenderedMessage): SendMailOptions {
  const fields = mailFields(from, addressing, message);
  return {
    ...fields,
    html: bodyPart(fields.html),
    ...(fields.text !== undefined ? { text: bodyPart(fields.text) } : {}),
    // nodemailer picks quoted-printable for a string, encoded in JavaScript in one go; a stream is base64.
    ...(message.html.length + message.text.length > STREAMED_PART_CHARS ? { textEncoding: 'base64' as const } : {}),
  };
}

/** A body part as nodemailer takes it: a short one as the string, a long one paced (paced-body.ts). */
function bodyPart(text: string): string | Readable {
  return text.length <= STREAMED_PART_CHARS ? text : pacedBody(text);
}

function refused(error: string, providerStatus: string): AttemptOutcome {
  return { kind: 'permanent', error, providerStatus };
}

/** An error for the operator's log: its code and its message clipped (the message may carry the server's reply). */
function clipped(err: unknown): { code?: string; message: string } {
  if (!(err instanceof Error)) return { message: clip(String(err), LOGGED_REPLY_CHARS) };
  return { code: (err as NodemailerError).code, message: clip(err.message, LOGGED_REPLY_CHARS) };
}
