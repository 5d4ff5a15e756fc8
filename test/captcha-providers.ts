/**
 * Local servers that answer siteverify as reCAPTCHA, hCaptcha and Turnstile do, per their
 * server-side verification docs: a form-encoded POST of secret, response, remoteip (and
 * hCaptcha's sitekey; Turnstile also takes JSON), answered by JSON with the real field names
 * and error codes. One node:http server on 127.0.0.1, one path per provider.
 *
 * Tokens are issued here for a registered site and are good once. A second verification or an
 * expired token answers Google's and Cloudflare's `timeout-or-duplicate`, hCaptcha's
 * `invalid-or-already-seen-response`. Modes make a provider fail as a network does: 'down'
 * closes the connection unanswered, 'hang' never answers, 'hold' answers when the test calls
 * release(), 'http500', 'garbage' (200, not JSON),
 * 'wrong-json' (200, JSON of another shape), and for Turnstile 'internal-error'.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CaptchaEndpoints } from '../relay/captcha.ts';
import type { CaptchaProvider } from '../relay/model.ts';

export type ProviderFamily = keyof CaptchaEndpoints;
export type ProviderMode = 'ok' | 'down' | 'hang' | 'hold' | 'http500' | 'garbage' | 'wrong-json' | 'internal-error';

export interface IssuedFor {
  /** The hostname the challenge was solved on, as the provider reports it. */
  hostname: string;
  /** reCAPTCHA v3 only (default 0.9). */
  score?: number;
  action?: string;
}

export interface RecordedRequest {
  provider: ProviderFamily;
  contentType: string;
  form: Record<string, string>;
}

export interface FakeCaptchaProviders {
  endpoints: CaptchaEndpoints;
  registerSite(provider: CaptchaProvider, siteKey: string, secret: string): void;
  /** A fresh token of the site, as the widget on a page would get it. */
  issue(provider: CaptchaProvider, siteKey: string, issued: IssuedFor): string;
  /** The token's validity window (two minutes at Google, five at Cloudflare) is over. */
  expire(token: string): void;
  /** The mode of the provider's endpoint (both reCAPTCHA versions share Google's). */
  setMode(provider: CaptchaProvider, mode: ProviderMode): void;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  /** Hung requests whose client closed the connection (the verifier gave up and aborted). */
  abortedByClient(): number;
  /** Answers every request held in 'hold' mode as 'ok' would have, and leaves that mode. */
  release(provider: CaptchaProvider): void;
  close(): Promise<void>;
}

const PATHS: Record<ProviderFamily, string> = {
  recaptcha: '/recaptcha/api/siteverify',
  hcaptcha: '/hcaptcha/siteverify',
  turnstile: '/turnstile/v0/siteverify',
};

/** Each provider's code for a token verified before or past its validity. */
const SPENT_CODE: Record<ProviderFamily, string> = {
  recaptcha: 'timeout-or-duplicate',
  hcaptcha: 'invalid-or-already-seen-response',
  turnstile: 'timeout-or-duplicate',
};

interface Site {
  provider: CaptchaProvider;
  siteKey: string;
  secret: string;
}

interface Token extends IssuedFor {
  site: Site;
  issuedAt: Date;
  used: boolean;
  expired: boolean;
}

interface Answer {
  success: boolean;
  'error-codes'?: string[];
  [field: string]: unknown;
}

export async function startCaptchaProviders(): Promise<FakeCaptchaProviders> {
  const sites = new Map<ProviderFamily, Map<string, Site>>();
  const tokens = new Map<string, Token>();
  const modes = new Map<ProviderFamily, ProviderMode>();
  const requests: RecordedRequest[] = [];
  /** Requests kept unanswered in 'hold' mode until release(). */
  const held: Array<{ provider: ProviderFamily; answer: () => void }> = [];
  let aborted = 0;
  let closing = false;
  for (const name of Object.keys(PATHS) as ProviderFamily[]) sites.set(name, new Map());

  const server = createServer((req, res) => {
    const provider = (Object.keys(PATHS) as ProviderFamily[]).find((name) => PATHS[name] === req.url);
    if (!provider) return void res.writeHead(404).end();
    if (req.method !== 'POST') return void res.writeHead(405, { allow: 'POST' }).end();
    readBody(req).then(
      (body) => {
        const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        const form = parseForm(provider, contentType, body);
        requests.push({ provider, contentType, form });
        respond(provider, form, req, res);
      },
      () => res.destroy(),
    );
  });

  function respond(provider: ProviderFamily, form: Record<string, string>, req: IncomingMessage, res: ServerResponse) {
    switch (modes.get(provider) ?? 'ok') {
      case 'down':
        return void req.socket.destroy();
      case 'hang':
        // Never answered; the client closing the connection is what the test looks for.
        res.on('close', () => {
          if (!closing) aborted++;
        });
        return;
      case 'hold':
        held.push({ provider, answer: () => sendJson(res, verify(provider, form)) });
        return;
      case 'http500':
        return void res.writeHead(500, { 'content-type': 'text/html' }).end('<html><body>Server Error</body></html>');
      case 'garbage':
        return void res.writeHead(200, { 'content-type': 'text/html' }).end('<!DOCTYPE html><title>Just a moment...</title>');
      case 'wrong-json':
        return void sendJson(res, { status: 'ok', valid: true });
      case 'internal-error':
        return void sendJson(res, { success: false, 'error-codes': ['internal-error'] });
      case 'ok':
        return void sendJson(res, verify(provider, form));
    }
  }

  /** The provider's siteverify logic, in the order its docs' error codes imply. */
  function verify(provider: ProviderFamily, form: Record<string, string>): Answer {
    const missing: string[] = [];
    if (!form.secret) missing.push('missing-input-secret');
    if (!form.response) missing.push('missing-input-response');
    if (missing.length > 0) return failure(missing);
    const registered = [...sites.get(provider)!.values()];
    const bySecret = registered.find((site) => site.secret === form.secret);
    if (!bySecret) return failure(['invalid-input-secret']);
    // hCaptcha checks the sitekey it is given against the secret.
    if (provider === 'hcaptcha' && form.sitekey !== undefined && !registered.some((s) => s.siteKey === form.sitekey && s.secret === form.secret)) {
      return failure(['sitekey-secret-mismatch']);
    }
    const token = tokens.get(form.response);
    if (!token || family(token.site.provider) !== provider) return failure(['invalid-input-response']);
    if (token.site.secret !== form.secret) {
      return failure([provider === 'hcaptcha' && form.sitekey !== undefined ? 'sitekey-secret-mismatch' : 'invalid-input-secret']);
    }
    if (token.expired || token.used) return failure([SPENT_CODE[provider]]);
    token.used = true;
    return success(provider, token);
  }

  function success(provider: ProviderFamily, token: Token): Answer {
    const solvedAt = token.issuedAt.toISOString();
    switch (provider) {
      case 'recaptcha': {
        // Google's format is yyyy-MM-dd'T'HH:mm:ssZZ; only v3 answers carry score and action.
        const answer: Answer = { success: true, challenge_ts: solvedAt.replace(/\.\d{3}Z$/, 'Z'), hostname: token.hostname };
        if (token.site.provider === 'recaptcha_v3') Object.assign(answer, { score: token.score ?? 0.9, action: token.action ?? 'submit' });
        return answer;
      }
      case 'hcaptcha':
        return { success: true, challenge_ts: solvedAt, hostname: token.hostname, credit: false };
      case 'turnstile':
        return { success: true, challenge_ts: solvedAt, hostname: token.hostname, 'error-codes': [], action: token.action ?? '', cdata: '' };
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;

  return {
    endpoints: { recaptcha: base + PATHS.recaptcha, hcaptcha: base + PATHS.hcaptcha, turnstile: base + PATHS.turnstile },
    registerSite(provider, siteKey, secret) {
      sites.get(family(provider))!.set(siteKey, { provider, siteKey, secret });
    },
    issue(provider, siteKey, issued) {
      const site = sites.get(family(provider))!.get(siteKey);
      if (!site || site.provider !== provider) throw new Error(`no ${provider} site ${siteKey} is registered`);
      const token = `${family(provider)}.${randomBytes(48).toString('base64url')}`;
      tokens.set(token, { ...issued, site, issuedAt: new Date(), used: false, expired: false });
      return token;
    },
    expire(token) {
      const issued = tokens.get(token);
      if (!issued) throw new Error('expire: unknown token');
      issued.expired = true;
    },
    setMode(provider, mode) {
      if (mode === 'internal-error' && provider !== 'turnstile') throw new Error('only Turnstile documents internal-error');
      modes.set(family(provider), mode);
    },
    requests,
    abortedByClient: () => aborted,
    release(provider) {
      modes.set(family(provider), 'ok');
      const waiting = held.filter((request) => request.provider === family(provider));
      held.splice(0, held.length, ...held.filter((request) => request.provider !== family(provider)));
      for (const request of waiting) request.answer();
    },
    async close() {
      closing = true;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function family(provider: CaptchaProvider): ProviderFamily {
  return provider === 'recaptcha_v2' || provider === 'recaptcha_v3' ? 'recaptcha' : provider;
}

function failure(codes: string[]): Answer {
  return { success: false, 'error-codes': codes };
}

/** Form-encoded bodies everywhere; Turnstile also reads JSON. Anything else carries no fields. */
function parseForm(provider: ProviderFamily, contentType: string, body: string): Record<string, string> {
  if (contentType === 'application/x-www-form-urlencoded') return Object.fromEntries(new URLSearchParams(body));
  if (provider === 'turnstile' && contentType === 'application/json') {
    try {
      const value = JSON.parse(body) as Record<string, unknown>;
      return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, String(field)]));
    } catch {
      return {};
    }
  }
  return {};
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, value: unknown) {
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(value));
}
