/**
 * The WhatsApp channel: one message to one phone number through the WhatsApp Business Cloud
 * API, `POST {graphUrl}/{phone-number-id}/messages` with the system user's bearer token. It
 * sends a text message or, when the settings name one, an approved template whose body takes
 * the message text as its one parameter. (A business may send free text only inside the
 * 24-hour window after the recipient wrote to it; outside it the API answers 131047, which
 * is why a template can be configured.)
 *
 * Meta asks clients to act on the Graph error `code`, not on the HTTP status, and its own
 * table gives throttling codes as 429 in one revision and 400 in another. So the code decides
 * where it is known, and the HTTP status only where it is not:
 *
 * | code                      | meaning                                         | HTTP     | outcome   |
 * |---------------------------|-------------------------------------------------|----------|-----------|
 * | 4, 80007, 130429          | app, account or number throughput rate limit     | 429, 400 | transient |
 * | 131048, 131056            | spam rate limit; same recipient too often        | 429, 400 | transient |
 * | 1, 2, 131000, 131016      | unknown error, service down or overloaded        | 4xx, 5xx | transient |
 * | 0, 190                    | token expired, revoked or invalid                | 401      | permanent |
 * | 3, 10, 200-299            | the app lacks a permission                       | 403, 500 | permanent |
 * | 100                       | invalid parameter (body, number ID)              | 400      | permanent |
 * | 131026                    | undeliverable: not on WhatsApp, old client       | 400      | permanent |
 * | 131047                    | outside the 24-hour window: needs a template     | 400      | permanent |
 * | 131051                    | unsupported message type                         | 400      | permanent |
 * | 132000-132999             | template missing, paused, wrong parameters       | 400, 404 | permanent |
 * | other, or no Graph error  | by status: 408, 429, 5xx transient; rest permanent               |
 *
 * Timeouts and network errors are transient. A transient answer's Retry-After (seconds or an
 * HTTP date) becomes `retryAfterMs`. Redirects are not followed: they would carry the token.
 */
import { E164_RULE, isE164 } from '../core/e164.ts';
import { describeFetchError as describeError, readAtMost } from '../core/fetch.ts';
import { clip, parseRetryAfter, type AttemptOutcome, type RenderedMessage } from './channel.ts';

/** How one WhatsApp Business phone number sends. */
export interface WhatsAppSettings {
  /** Graph API base, e.g. https://graph.facebook.com/v21.0 (configurable so tests use a local server). */
  graphUrl: string;
  /** The business phone number's ID in the Cloud API (not the phone number itself). */
  phoneNumberId: string;
  /** System user access token with whatsapp_business_messaging. Never logged. */
  token: string;
  /** Send this approved template (its body gets one text parameter: the message text) instead of a text message. */
  template?: { name: string; language: string };
  /** The whole attempt, answer body included, is given up after this long. */
  timeoutMs: number;
}

/** The Cloud API refuses a text body longer than this many characters. */
export const MAX_TEXT_BODY_CHARS = 4096;
/** The longest template parameter text sent. */
export const MAX_TEMPLATE_PARAMETER_CHARS = 1024;
/** A send result or Graph error is well under 1 KiB; more than this is not one. */
const MAX_ANSWER_BYTES = 64 * 1024;

type FailureKind = 'transient' | 'permanent';

const TRANSIENT_CODES = new Set([4, 80007, 130429, 131048, 131056, 1, 2, 131000, 131016]);
const PERMANENT_CODES = new Set([0, 190, 3, 10, 100, 131026, 131047, 131051]);

/** The fields of a Graph error body this module reads. */
interface GraphError {
  message: string;
  code?: number;
  details?: string;
  fbtraceId?: string;
}

/** Thrown inside send() only: an answer that cannot be read (too big, not a send result) becomes one transient outcome. */
class UnreadableAnswer extends Error {
  constructor(
    message: string,
    readonly providerStatus: string,
  ) {
    super(message);
  }
}

/** Sends channel messages through the WhatsApp Business Cloud API. Stateless: one instance serves every phone number. */
export class WhatsAppSender {
  private readonly fetch: typeof fetch;

  constructor(options: { fetch?: typeof fetch } = {}) {
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /**
   * Makes one attempt to hand `message` to the Cloud API for `to` (E.164: core/e164.ts).
   * Never throws for a failure of the API or the network: every one is an outcome.
   */
  async send(settings: WhatsAppSettings, to: string, message: RenderedMessage): Promise<AttemptOutcome> {
    const badNumber = refusedNumber(to);
    if (badNumber) return badNumber;
    const url = messagesUrl(settings);
    if (!url) return permanent(`graphUrl ${JSON.stringify(clip(settings.graphUrl, 200))} is not a URL`, 'not sent');
    const body = JSON.stringify(buildSendRequest(settings, to.slice(1), message));
    // One signal for the request and the answer: an API that stalls mid-body is cut off too.
    const signal = AbortSignal.timeout(settings.timeoutMs);
    try {
      const response = await this.fetch(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${settings.token}`, 'content-type': 'application/json', accept: 'application/json' },
        body,
        signal,
        redirect: 'manual',
      });
      return await judge(response, url);
    } catch (err) {
      if (err instanceof UnreadableAnswer) return { kind: 'transient', error: clip(err.message), providerStatus: err.providerStatus };
      if (signal.aborted) return { kind: 'transient', error: `no answer from ${url.origin} within ${settings.timeoutMs} ms`, providerStatus: 'timeout' };
      return { kind: 'transient', error: clip(`request to ${url.origin} failed: ${describeError(err)}`), providerStatus: 'network error' };
    }
  }
}

/** A recipient that is not an E.164 number is refused before anything is sent (or kept). */
export function refusedNumber(to: string): AttemptOutcome | undefined {
  return isE164(to) ? undefined : permanent(`the recipient ${JSON.stringify(clip(to, 40))} is not an E.164 number (${E164_RULE})`, 'not sent');
}

/** Where the send request goes: `{graphUrl}/{phone-number-id}/messages`; undefined when graphUrl is not a URL. */
export function messagesUrl(settings: Pick<WhatsAppSettings, 'graphUrl' | 'phoneNumberId'>): URL | undefined {
  try {
    return new URL(`${settings.graphUrl.replace(/\/+$/, '')}/${encodeURIComponent(settings.phoneNumberId)}/messages`);
  } catch {
    return undefined;
  }
}

/**
 * The JSON body of the send request: a text message, or the configured template. `digits`: the
 * number without its `+`. The sender and the development inbox (delivery/inbox.ts) both use it.
 */
export function buildSendRequest(settings: Pick<WhatsAppSettings, 'template'>, digits: string, message: RenderedMessage): Record<string, unknown> {
  const envelope = { messaging_product: 'whatsapp', recipient_type: 'individual', to: digits };
  if (!settings.template) {
    const text = [message.subject, message.text].filter((part) => part.length > 0).join('\n\n');
    return { ...envelope, type: 'text', text: { preview_url: false, body: clipCharacters(text, MAX_TEXT_BODY_CHARS) } };
  }
  const { name, language } = settings.template;
  // The API refuses an empty parameter; a message with no text still has its subject.
  const parameter = templateParameterText(message.text) || templateParameterText(message.subject);
  return {
    ...envelope,
    type: 'template',
    template: { name, language: { code: language }, components: [{ type: 'body', parameters: [{ type: 'text', text: parameter }] }] },
  };
}

/** The API refuses parameters with newlines, tabs or runs of 4+ spaces: every run of whitespace becomes one space. */
function templateParameterText(text: string): string {
  return clipCharacters(text.replace(/\s+/g, ' ').trim(), MAX_TEMPLATE_PARAMETER_CHARS);
}

/**
 * At most `limit` characters (code points, as the API counts them), the last one '…' when
 * cut. The cut falls between code points, so a surrogate pair is never split.
 */
export function clipCharacters(text: string, limit: number): string {
  // Fewer UTF-16 units than the limit means fewer code points too.
  if (text.length <= limit) return text;
  let count = 0;
  let offset = 0;
  let keep = 0;
  for (const char of text) {
    count++;
    if (count === limit) keep = offset;
    if (count > limit) return `${text.slice(0, keep)}…`;
    offset += char.length;
  }
  return text;
}

/** Classifies the API's answer; throws UnreadableAnswer when it cannot be read. */
async function judge(response: Response, url: URL): Promise<AttemptOutcome> {
  const status = response.status;
  if (status >= 300 && status < 400) {
    await discard(response);
    const location = clip(response.headers.get('location') ?? '(none)', 200);
    return permanent(`${url.origin} answered a redirect to ${location}; not followed (graphUrl is wrong)`, `http ${status}`);
  }
  const text = await readBounded(response, status);
  if (status >= 200 && status < 300) {
    const messageId = parseMessageId(text);
    // A 2xx that is not a send result may or may not have sent: retrying risks a duplicate, giving up a loss.
    if (messageId === undefined) throw new UnreadableAnswer(`HTTP ${status} from ${url.origin} is not a Cloud API send result: ${snippet(text)}`, `http ${status}`);
    return { kind: 'delivered', providerStatus: `http ${status}`, providerId: messageId };
  }
  const error = parseGraphError(text);
  const providerStatus = error?.code === undefined ? `http ${status}` : `http ${status} code ${error.code}`;
  const description = error ? describeGraphError(error) : `HTTP ${status} without a Graph error: ${snippet(text)}`;
  if (classify(status, error?.code) === 'permanent') return permanent(description, providerStatus);
  const retryAfterMs = parseRetryAfter(response.headers.get('retry-after') ?? undefined);
  return { kind: 'transient', error: clip(description), providerStatus, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
}

/** The table in this file's header: the Graph code where it is known, else the HTTP status. */
function classify(status: number, code: number | undefined): FailureKind {
  if (code !== undefined) {
    if (TRANSIENT_CODES.has(code)) return 'transient';
    if (PERMANENT_CODES.has(code) || (code >= 200 && code <= 299) || (code >= 132000 && code <= 132999)) return 'permanent';
  }
  return status === 408 || status === 429 || status >= 500 ? 'transient' : 'permanent';
}

/** `messages[0].id` of a send result, or undefined when the text is not one. */
function parseMessageId(text: string): string | undefined {
  const value = parseJson(text);
  const messages = isObject(value) ? value.messages : undefined;
  const first: unknown = Array.isArray(messages) ? messages[0] : undefined;
  return isObject(first) && typeof first.id === 'string' && first.id.length > 0 ? first.id : undefined;
}

/** The Graph error of an answer body, or undefined when the body does not hold one. */
function parseGraphError(text: string): GraphError | undefined {
  const value = parseJson(text);
  const error = isObject(value) ? value.error : undefined;
  if (!isObject(error) || typeof error.message !== 'string') return undefined;
  const data = error.error_data;
  return {
    message: error.message,
    code: typeof error.code === 'number' && Number.isInteger(error.code) ? error.code : undefined,
    details: isObject(data) && typeof data.details === 'string' ? data.details : undefined,
    fbtraceId: typeof error.fbtrace_id === 'string' ? error.fbtrace_id : undefined,
  };
}

/** The API's message, its details, and the trace ID Meta support asks for. */
function describeGraphError(error: GraphError): string {
  let text = error.message;
  if (error.details && !text.includes(error.details)) text += `: ${error.details}`;
  if (error.fbtraceId) text += ` (fbtrace_id ${clip(error.fbtraceId, 64)})`;
  return text;
}


/** Reads at most MAX_ANSWER_BYTES of the body as UTF-8, or throws UnreadableAnswer. */
async function readBounded(response: Response, status: number): Promise<string> {
  const { text, overflow } = await readAtMost(response, MAX_ANSWER_BYTES);
  // An error status still says enough to classify; an unreadable success does not.
  if (overflow && status >= 200 && status < 300) {
    throw new UnreadableAnswer(`the HTTP ${status} answer exceeds ${MAX_ANSWER_BYTES} bytes: not a Cloud API send result`, `http ${status}`);
  }
  return text;
}

async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => {});
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The start of an unexpected body, on one line, for the attempt record. */
function snippet(text: string): string {
  return JSON.stringify(clipCharacters(text.replace(/\s+/g, ' ').trim(), 120));
}


const permanent = (error: string, providerStatus: string): AttemptOutcome => ({ kind: 'permanent', error: clip(error), providerStatus });
