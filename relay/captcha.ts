/**
 * Server-side CAPTCHA verification of public form submissions (relay spec 4.1): the visitor's
 * token is checked with the site's provider over the provider's siteverify API. The three APIs
 * share one shape: a form-encoded POST of `secret`, `response` and optional `remoteip`,
 * answered by JSON with `success`, `challenge_ts`, `hostname` and `error-codes` (reCAPTCHA v3
 * adds `score` and `action`). Differences handled here:
 * - hCaptcha takes `sitekey`, so the provider itself refuses a token of another key pair.
 * - Turnstile's `idempotency_key` is never sent: it would let one token pass twice.
 * - Turnstile answers `internal-error` when it could not decide; that is an outage, not a verdict.
 *
 * The outcome is 'rejected' (the token is not good: 400) or 'unavailable' (no usable answer:
 * 503, retry). Both refuse the submission; `detail` says why, for the server log only.
 */
import { describeFetchError as describeError, readAtMost } from '../core/fetch.ts';
import type { CaptchaProvider } from './model.ts';

/** Full siteverify URLs, one per provider family (both reCAPTCHA versions share Google's). */
export interface CaptchaEndpoints {
  recaptcha: string;
  hcaptcha: string;
  turnstile: string;
}

export const DEFAULT_CAPTCHA_ENDPOINTS: CaptchaEndpoints = Object.freeze({
  recaptcha: 'https://www.google.com/recaptcha/api/siteverify',
  hcaptcha: 'https://api.hcaptcha.com/siteverify',
  turnstile: 'https://challenges.cloudflare.com/turnstile/v0/siteverify',
});

/** One token to verify, with what the site's configuration says about it. */
export interface CaptchaCheck {
  provider: CaptchaProvider;
  /** The site's provider secret, unsealed. Never logged. */
  secret: string;
  /** The provider's public site key configured for the site (sent to hCaptcha). */
  siteKey: string;
  /** The visitor's token (`captchaToken`). */
  token: string;
  /** The visitor's IP address, passed on to the provider. */
  remoteIp?: string;
  /** Hostnames of the site's Allowed origins; empty: the solving hostname is not checked. */
  allowedHostnames: string[];
  /** recaptcha_v3 only: the lowest score accepted (default 0.5, as the admin API stores it). */
  scoreThreshold?: number;
}

export type CaptchaOutcome = { ok: true } | { ok: false; reason: 'rejected' | 'unavailable'; detail: string };

/** The spec's limit of `captchaToken`: a longer one is refused before the provider is asked. */
const MAX_TOKEN_LENGTH = 4096;
const DEFAULT_SCORE_THRESHOLD = 0.5;
/** A siteverify answer is a few hundred bytes; more than this is not one. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** The fields of a siteverify answer this module reads. */
interface SiteverifyAnswer {
  success: boolean;
  hostname?: string;
  score?: number;
  action?: string;
  errorCodes: string[];
}

/** Thrown inside verify() only, to turn every transport failure into one 'unavailable' outcome. */
class Unavailable extends Error {}

export class CaptchaVerifier {
  private readonly endpoints: CaptchaEndpoints;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;

  constructor(options: { endpoints: CaptchaEndpoints; timeoutMs: number; fetch?: typeof fetch }) {
    this.endpoints = { ...options.endpoints };
    this.timeoutMs = options.timeoutMs;
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /** Verifies one token. Never throws: every failure is an outcome. */
  async verify(check: CaptchaCheck): Promise<CaptchaOutcome> {
    const { provider, token } = check;
    if (token.length === 0) return rejected(provider, 'the token is empty');
    if (token.length > MAX_TOKEN_LENGTH) {
      return rejected(provider, `the token has ${token.length} characters, over the limit of ${MAX_TOKEN_LENGTH}`);
    }
    // The handler refuses a site without a secret first; if one gets here, fail closed.
    if (check.secret.length === 0) return unavailable(provider, 'no secret configured for the site');
    let answer: SiteverifyAnswer;
    try {
      answer = await this.ask(check);
    } catch (err) {
      if (err instanceof Unavailable) return unavailable(provider, err.message);
      return unavailable(provider, `verification failed unexpectedly: ${describeError(err)}`);
    }
    return judge(check, answer);
  }

  /** POSTs the check to the provider and returns its answer, or throws Unavailable. */
  private async ask(check: CaptchaCheck): Promise<SiteverifyAnswer> {
    const url = this.endpoints[family(check.provider)];
    const form = new URLSearchParams({ secret: check.secret, response: check.token });
    if (check.remoteIp) form.set('remoteip', check.remoteIp);
    if (check.provider === 'hcaptcha') form.set('sitekey', check.siteKey);
    // One signal for the request and the body: a provider that stalls mid-answer is cut off too.
    const signal = AbortSignal.timeout(this.timeoutMs);
    let body: string;
    try {
      const response = await this.fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: form,
        signal,
        // A redirect would carry the secret to wherever it points.
        redirect: 'error',
      });
      if (response.status !== 200) {
        await response.body?.cancel().catch(() => {});
        throw new Unavailable(`HTTP ${response.status} from ${url}`);
      }
      body = await readBounded(response, MAX_ANSWER_BYTES);
    } catch (err) {
      if (err instanceof Unavailable) throw err;
      if (signal.aborted) throw new Unavailable(`no answer from ${url} within ${this.timeoutMs} ms`);
      throw new Unavailable(`request to ${url} failed: ${describeError(err)}`);
    }
    const answer = parseAnswer(body);
    if (!answer) throw new Unavailable(`the answer of ${url} is not siteverify JSON: ${JSON.stringify(body.slice(0, 120))}`);
    // Turnstile documents internal-error as "the request can be retried": no verdict on the token.
    if (check.provider === 'turnstile' && !answer.success && answer.errorCodes.includes('internal-error')) {
      throw new Unavailable(`${url} answered internal-error (error-codes [${answer.errorCodes.join(', ')}])`);
    }
    return answer;
  }
}

/** Applies the site's rules to a provider's answer. */
function judge(check: CaptchaCheck, answer: SiteverifyAnswer): CaptchaOutcome {
  const { provider } = check;
  const seen = describeAnswer(answer);
  if (!answer.success) {
    // Expired, reused, forged, or the secret is not the token's key pair's: all the provider's no.
    return rejected(provider, `the provider refused the token: error-codes [${answer.errorCodes.join(', ')}]${seen}`);
  }
  if (check.allowedHostnames.length > 0) {
    const allowed = new Set(check.allowedHostnames.map(normalizeHostname));
    if (answer.hostname === undefined) {
      return rejected(provider, `the answer names no hostname; allowed: [${[...allowed].join(', ')}]${seen}`);
    }
    if (!allowed.has(normalizeHostname(answer.hostname))) {
      return rejected(provider, `solved on a hostname not among allowed [${[...allowed].join(', ')}]${seen}`);
    }
  }
  if (provider === 'recaptcha_v3') {
    const threshold = check.scoreThreshold ?? DEFAULT_SCORE_THRESHOLD;
    if (answer.score === undefined) {
      return rejected(provider, `the answer has no score: v2 keys configured as v3, or a v2 token${seen}`);
    }
    if (answer.score < threshold) return rejected(provider, `score ${answer.score} is below the threshold ${threshold}${seen}`);
  }
  // Google answers a v3 token with a score; a v2 site given one has a mismatched key pair.
  if (provider === 'recaptcha_v2' && answer.score !== undefined) {
    return rejected(provider, `the answer carries a score (${answer.score}): a v3 token or v3 keys on a v2 site${seen}`);
  }
  return { ok: true };
}

/** The answer's fields, or undefined when the text is not the siteverify JSON shape. */
function parseAnswer(text: string): SiteverifyAnswer | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const raw = value as Record<string, unknown>;
  if (typeof raw.success !== 'boolean') return undefined;
  const codes = raw['error-codes'] ?? [];
  if (!Array.isArray(codes) || !codes.every((code) => typeof code === 'string')) return undefined;
  // A field of the wrong type means we do not know what we are reading.
  const types = { hostname: 'string', score: 'number', action: 'string' } as const;
  for (const [key, type] of Object.entries(types)) {
    if (raw[key] != null && typeof raw[key] !== type) return undefined;
  }
  const hostname = (raw.hostname ?? undefined) as string | undefined;
  const score = (raw.score ?? undefined) as number | undefined;
  const action = (raw.action ?? undefined) as string | undefined;
  if (score !== undefined && !Number.isFinite(score)) return undefined;
  return { success: raw.success, hostname, score, action, errorCodes: codes as string[] };
}

/** Reads at most `limit` bytes of the body as UTF-8, or throws Unavailable. */
async function readBounded(response: Response, limit: number): Promise<string> {
  const { text, overflow } = await readAtMost(response, limit);
  if (overflow) throw new Unavailable(`the answer exceeds ${limit} bytes`);
  return text;
}

function family(provider: CaptchaProvider): keyof CaptchaEndpoints {
  return provider === 'recaptcha_v2' || provider === 'recaptcha_v3' ? 'recaptcha' : provider;
}

/** Hostname only, lower case, without port or trailing dot; an origin is reduced to its host. */
function normalizeHostname(value: string): string {
  const trimmed = value.trim();
  let host: string;
  try {
    host = new URL(trimmed.includes('://') ? trimmed : `http://${trimmed}`).hostname;
  } catch {
    host = trimmed.toLowerCase();
  }
  return host.replace(/^\[|\]$/g, '').replace(/\.$/, '');
}

/** What the provider said about the token, for the log (never the token or the secret). */
function describeAnswer(answer: SiteverifyAnswer): string {
  const parts: string[] = [];
  if (answer.hostname !== undefined) parts.push(`hostname "${answer.hostname}"`);
  if (answer.score !== undefined) parts.push(`score ${answer.score}`);
  if (answer.action !== undefined) parts.push(`action "${answer.action}"`);
  return parts.length > 0 ? ` (${parts.join(', ')})` : '';
}


const rejected = (provider: CaptchaProvider, why: string): CaptchaOutcome => ({
  ok: false,
  reason: 'rejected',
  detail: `${provider}: ${why}`,
});

const unavailable = (provider: CaptchaProvider, why: string): CaptchaOutcome => ({
  ok: false,
  reason: 'unavailable',
  detail: `${provider}: ${why}`,
});
