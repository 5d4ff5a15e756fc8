/**
 * Webhook delivery: one signed POST to one receiver, per the Standard Webhooks specification
 * (https://www.standardwebhooks.com: `webhook-id`, `webhook-timestamp`, `webhook-signature`
 * with one `v1,<HMAC-SHA256>` per secret, several while a secret is being rotated).
 *
 * The egress policy checks the URL before every attempt and names the one address to use; the
 * socket goes to exactly that address (TLS still verifies the certificate against the host
 * name), so DNS cannot be asked twice. Redirects are never followed: the 3xx is the answer.
 *
 * An attempt's error names what happened in our words (`http 500 Internal Server Error`,
 * `redirect not followed`), never the receiver's: no body, no Location (the admin API shows the
 * error to the tenant, and a receiver's bytes are not ours to relay).
 */
import { createHmac } from 'node:crypto';
import http, { STATUS_CODES } from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { parseRetryAfter, type AttemptOutcome } from './channel.ts';
import { connectToApproved, refusedOutcome, type ConnectOptions, type EgressPolicy } from './egress.ts';

export interface WebhookSenderOptions {
  egress: EgressPolicy;
  /** The whole attempt: check, connect, request and response body. Default 15000. */
  timeoutMs?: number;
  /** The most of a response body read (and dropped: the status decides); past it the socket is closed. Default 64 KiB. */
  maxResponseBytes?: number;
  /** Opens the socket (tests inject one). Default: net.connect, or tls.connect for https. */
  connect?: (options: ConnectOptions) => net.Socket;
  /** The User-Agent header. Default `Sluice-Webhooks/1`. */
  userAgent?: string;
}

/** The receiver and its signing secrets (`whsec_` + base64 of the key; the newest first while rotating). */
export interface WebhookTarget {
  url: string;
  secrets: string[];
}

export interface WebhookDelivery {
  /** The same on every attempt of one message: receivers deduplicate by it. No `.`. */
  id: string;
  /** This attempt's time (signed, so a receiver can refuse replays). */
  timestamp: Date;
  /** JSON text, sent and signed as is. */
  body: string;
}

const DEFAULT_TIMEOUT_MS = 15_000;
const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;
const SECRET_PREFIX = 'whsec_';
const DEFAULT_USER_AGENT = 'Sluice-Webhooks/1';

/** Sends webhooks; one instance serves every receiver. */
export class WebhookSender {
  private readonly egress: EgressPolicy;
  private readonly timeoutMs: number;
  private readonly maxResponseBytes: number;
  private readonly connect: (options: ConnectOptions) => net.Socket;
  private readonly userAgent: string;

  constructor(options: WebhookSenderOptions) {
    this.egress = options.egress;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.connect = options.connect ?? connectToApproved;
    this.userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
  }

  /** One attempt; classifies every failure of the receiver, the network or the policy, throws only for a bug. */
  async send(target: WebhookTarget, delivery: WebhookDelivery): Promise<AttemptOutcome> {
    const signed = webhookHeaders(target, delivery, this.userAgent);
    if ('problem' in signed) return badSecret(signed.problem);

    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), this.timeoutMs);
    const timedOut = (): AttemptOutcome => ({ kind: 'transient', error: `no complete answer within ${this.timeoutMs} ms`, providerStatus: 'timeout' });
    try {
      const verdict = await Promise.race([this.egress.check(target.url, 'webhook'), aborted(abort.signal)]);
      if (verdict === undefined) return timedOut();
      if (!verdict.ok) return refusedOutcome(verdict);
      return await this.post(verdict.url, verdict.address, signed.headers, delivery.body, abort.signal, timedOut);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The request itself, to `address`; settles once, whatever happens first. */
  private post(url: URL, address: string, headers: Record<string, string>, body: string, signal: AbortSignal, timedOut: () => AttemptOutcome): Promise<AttemptOutcome> {
    return new Promise((resolve) => {
      let settled = false;
      const settle = (outcome: AttemptOutcome) => {
        if (!settled) resolve(outcome);
        settled = true;
      };
      signal.addEventListener('abort', () => settle(timedOut()), { once: true });

      const secure = url.protocol === 'https:';
      const host = url.hostname.replace(/^\[|\]$/g, '');
      const port = Number(url.port) || (secure ? 443 : 80);
      const servername = secure && net.isIP(host) === 0 ? host : undefined;
      const request = (secure ? https : http).request({
        method: 'POST',
        host,
        port,
        defaultPort: secure ? 443 : 80,
        path: `${url.pathname}${url.search}`,
        headers,
        signal,
        // No agent: this socket, to the checked address, is the only one the request may use.
        createConnection: () => this.connect({ host: address, port, tls: secure, ...(servername ? { servername } : {}) }),
      });
      request.on('error', (error: NodeJS.ErrnoException) => {
        settle(signal.aborted ? timedOut() : { kind: 'transient', error: `connection to ${address}:${port} failed: ${errorCode(error)}`, providerStatus: 'network' });
      });
      request.on('response', (response) => {
        let size = 0;
        const answer = () => classify(response);
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size >= this.maxResponseBytes && !response.complete) {
            // Read to let the receiver finish, up to a bound: the rest is not read.
            settle(answer());
            response.destroy();
          }
        });
        response.on('end', () => settle(answer()));
        response.on('close', () => {
          if (!response.complete) settle(signal.aborted ? timedOut() : { kind: 'transient', error: `http ${response.statusCode}: the connection closed before the response ended`, providerStatus: `http ${response.statusCode}` });
        });
      });
      request.end(body);
    });
  }
}

/**
 * The request's headers, signed: what the sender sends and the development inbox
 * (delivery/inbox.ts) keeps. Throws for an id with a dot or whitespace (a bug upstream); a bad
 * secret is a `problem` (the attempt is refused).
 */
export function webhookHeaders(target: WebhookTarget, delivery: WebhookDelivery, userAgent = DEFAULT_USER_AGENT): { headers: Record<string, string> } | { problem: string } {
  if (/[.\s]/.test(delivery.id)) throw new TypeError(`webhook id ${JSON.stringify(delivery.id)} contains a dot or whitespace`);
  const signature = signatures(target.secrets, delivery);
  if (typeof signature !== 'string') return signature;
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(delivery.body)),
    'user-agent': userAgent,
    'webhook-id': delivery.id,
    'webhook-timestamp': String(unixSeconds(delivery.timestamp)),
    'webhook-signature': signature,
  };
  return { headers };
}

/** A signing secret that cannot sign: the attempt is refused before anything is sent (or kept). */
export function badSecret(problem: string): AttemptOutcome {
  return { kind: 'permanent', error: problem, providerStatus: 'bad secret' };
}

/** The `webhook-signature` header, or what is wrong with a secret. */
function signatures(secrets: string[], delivery: WebhookDelivery): string | { problem: string } {
  if (secrets.length === 0) return { problem: 'the webhook has no signing secret' };
  const signed = `${delivery.id}.${unixSeconds(delivery.timestamp)}.${delivery.body}`;
  const parts: string[] = [];
  for (const [index, secret] of secrets.entries()) {
    const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
    // Node decodes base64url as well: the relay's generated secrets are base64url.
    if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(encoded)) return { problem: `signing secret ${index + 1} is not ${SECRET_PREFIX} followed by base64` };
    const key = Buffer.from(encoded, 'base64');
    parts.push(`v1,${createHmac('sha256', key).update(signed).digest('base64')}`);
  }
  return parts.join(' ');
}

/**
 * 2xx delivered; 3xx permanent (not followed); 408, 429 and 5xx transient, no sooner than a
 * Retry-After (the spec names it for 503 as well); any other status permanent. The error is
 * the status and its standard reason phrase (node's STATUS_CODES), never the receiver's text.
 */
function classify(response: http.IncomingMessage): AttemptOutcome {
  const status = response.statusCode ?? 0;
  const providerStatus = `http ${status}`;
  if (status >= 200 && status < 300) return { kind: 'delivered', providerStatus };
  const phrase = STATUS_CODES[status];
  const said = phrase ? `${providerStatus} ${phrase}` : providerStatus;
  if (status >= 300 && status < 400) {
    return { kind: 'permanent', error: `${said}: redirect not followed (configure the final URL)`, providerStatus };
  }
  if (status === 408 || status === 429 || (status >= 500 && status < 600)) {
    const retryAfterMs = parseRetryAfter(response.headers['retry-after']);
    return { kind: 'transient', error: said, providerStatus, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
  }
  return { kind: 'permanent', error: said, providerStatus };
}

/**
 * A socket or TLS failure by its code (ECONNREFUSED, ERR_TLS_CERT_ALTNAME_INVALID): node's
 * messages may quote the peer (a certificate's names, a malformed status line), codes do not.
 */
function errorCode(error: NodeJS.ErrnoException): string {
  return typeof error.code === 'string' && /^[A-Z][A-Z0-9_]*$/.test(error.code) ? error.code : 'a network error';
}

function unixSeconds(date: Date): number {
  return Math.floor(date.getTime() / 1000);
}

/** Resolves (to undefined) when the signal aborts: a race partner for work that cannot be cancelled. */
function aborted(signal: AbortSignal): Promise<undefined> {
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(undefined), { once: true }));
}
