/**
 * A local stand-in for the WhatsApp Business Cloud API's send endpoint,
 * `POST /{version}/{phone-number-id}/messages`, for tests of the WhatsApp channel. It checks
 * what the real API checks, in its order: the path (an unknown phone number ID is Graph's
 * code 100 "Unsupported post request"), the bearer token (401, code 190 OAuthException), then
 * the body (400, code 100 "Invalid parameter" for a malformed one; a template it does not know
 * is 404 code 132001, a wrong parameter count 400 code 132000). Error bodies have the Graph
 * shape `{error: {message, type, code, error_subcode?, error_data?, fbtrace_id}}`; a send it
 * accepts is recorded and answered `{messaging_product, contacts: [{input, wa_id}],
 * messages: [{id: 'wamid…'}]}`.
 *
 * Modes, globally or for one recipient, make the API fail as it does in production:
 * 'throttled' (code 130429; HTTP 429 as Meta's error table gives it, or 400 as some answers
 * carry it; with or without Retry-After), 'undeliverable' (400, code 131026), 'bad-token'
 * (401, code 190: the token expired), 'error-500' (500, code 131000), 'hang' (never answers),
 * 'oversized' (200, then a body that does not end until the client hangs up).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FakeWhatsAppMode = 'ok' | 'throttled' | 'undeliverable' | 'bad-token' | 'error-500' | 'hang' | 'oversized';

export interface FakeWhatsAppModeOptions {
  /** Only sends to this recipient ('+' optional); without it, the mode is the default for all. */
  to?: string;
  /** 'throttled' only: the Retry-After header's value in seconds; without it, no header. */
  retryAfterSeconds?: number;
  /** 'throttled' only: the HTTP status (default 429). */
  httpStatus?: 400 | 429;
}

/** An approved message template the fake knows. */
export interface FakeTemplate {
  name: string;
  /** Language code, e.g. 'en_US'. */
  language: string;
  /** How many text parameters the template's body takes. */
  bodyParameters: number;
}

/** A send the fake accepted. */
export interface AcceptedMessage {
  /** The request path, version included. */
  path: string;
  /** The Authorization header as received. */
  authorization: string;
  contentType: string;
  /** The parsed JSON body as received. */
  body: Record<string, unknown>;
  /** The recipient as the API reports it back (`contacts[0].wa_id`): digits only. */
  waId: string;
  /** The message ID answered. */
  wamid: string;
}

export interface FakeWhatsApp {
  /** The Graph API base to configure (`graphUrl`), version included. */
  url: string;
  /** Every send accepted, in order. */
  messages: AcceptedMessage[];
  /** How many requests arrived, accepted or not. */
  requestCount(): number;
  /** Switches the API (or one recipient's sends) into a mode; 'ok' restores normal service. */
  setMode(mode: FakeWhatsAppMode, options?: FakeWhatsAppModeOptions): void;
  /** Requests left unanswered ('hang') or unfinished ('oversized') that the client gave up on. */
  abortedByClient(): number;
  close(): Promise<void>;
}

export interface FakeWhatsAppOptions {
  token: string;
  phoneNumberId: string;
  /** Templates approved for the account (default none). */
  templates?: FakeTemplate[];
  /** The version path segment (default 'v21.0'). */
  version?: string;
}

/** The API refuses text bodies over this many characters. */
const MAX_TEXT_BODY_CHARS = 4096;
/** A request body larger than this is not a send: the connection is cut, as a front end would. */
const MAX_REQUEST_BYTES = 1024 * 1024;
/** What 'oversized' sends before giving up on a client that keeps reading: far past any sane cap. */
const OVERSIZED_LIMIT_BYTES = 64 * 1024 * 1024;

interface ModeSetting {
  mode: FakeWhatsAppMode;
  retryAfterSeconds?: number;
  httpStatus?: 400 | 429;
}

/** A Graph error answer. */
interface GraphError {
  status: number;
  message: string;
  type: string;
  code: number;
  subcode?: number;
  details?: string;
}

export async function startFakeWhatsApp(options: FakeWhatsAppOptions): Promise<FakeWhatsApp> {
  const version = options.version ?? 'v21.0';
  const templates = options.templates ?? [];
  const messages: AcceptedMessage[] = [];
  const modeByRecipient = new Map<string, ModeSetting>();
  let defaultMode: ModeSetting = { mode: 'ok' };
  let requests = 0;
  let aborted = 0;
  let closing = false;

  const server = createServer((req, res) => {
    requests++;
    readBody(req).then(
      (text) => respond(req, res, text),
      () => req.socket.destroy(),
    );
  });

  function respond(req: IncomingMessage, res: ServerResponse, text: string) {
    const path = (req.url ?? '').split('?')[0]!;
    const segments = path.split('/').filter(Boolean);
    if (segments.length !== 3 || segments[0] !== version || segments[2] !== 'messages') {
      return sendError(res, { status: 400, message: 'Unknown path components: ' + path, type: 'OAuthException', code: 2500 });
    }
    // Graph checks the token before it looks up the object.
    const authorization = req.headers.authorization ?? '';
    if (authorization !== `Bearer ${options.token}`) {
      return sendError(res, { status: 401, type: 'OAuthException', code: 190, message: 'Invalid OAuth access token - Cannot parse access token' });
    }
    const method = (req.method ?? '').toLowerCase();
    if (segments[1] !== options.phoneNumberId || method !== 'post') {
      return sendError(res, {
        status: 400,
        type: 'GraphMethodException',
        code: 100,
        subcode: 33,
        message:
          `Unsupported ${method} request. Object with ID '${segments[1]}' does not exist, cannot be loaded due to ` +
          'missing permissions, or does not support this operation.',
      });
    }
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    const parsed = contentType === 'application/json' ? parseObject(text) : undefined;
    if (!parsed) return sendError(res, invalidParameter('The request body is not a JSON object.'));
    const refusal = checkSend(parsed);
    if (refusal) return sendError(res, refusal);

    const to = String(parsed.to);
    const waId = to.replace(/^\+/, '');
    const setting = modeByRecipient.get(waId) ?? defaultMode;
    switch (setting.mode) {
      case 'hang':
        res.on('close', () => {
          if (!closing) aborted++;
        });
        return;
      case 'oversized':
        return streamForever(res);
      case 'throttled': {
        const headers: Record<string, string> = {};
        if (setting.retryAfterSeconds !== undefined) headers['retry-after'] = String(setting.retryAfterSeconds);
        return sendError(
          res,
          {
            status: setting.httpStatus ?? 429,
            type: 'OAuthException',
            code: 130429,
            subcode: 2494055,
            message: '(#130429) Rate limit hit',
            details: 'Cloud API message throughput has been reached.',
          },
          headers,
        );
      }
      case 'undeliverable':
        return sendError(res, {
          status: 400,
          type: 'OAuthException',
          code: 131026,
          message: '(#131026) Message undeliverable',
          details: 'Unable to deliver message. The recipient may not be a WhatsApp user or may use an old WhatsApp version.',
        });
      case 'bad-token':
        return sendError(res, {
          status: 401,
          type: 'OAuthException',
          code: 190,
          subcode: 463,
          message: 'Error validating access token: Session has expired on Friday, 01-Mar-24 10:00:00 PST.',
        });
      case 'error-500':
        return sendError(res, {
          status: 500,
          type: 'OAuthException',
          code: 131000,
          message: '(#131000) Something went wrong',
          details: 'Message failed to send due to an unknown error.',
        });
      case 'ok': {
        const wamid = `wamid.${randomBytes(24).toString('base64')}`;
        messages.push({ path, authorization, contentType, body: parsed, waId, wamid });
        return sendJson(res, 200, { messaging_product: 'whatsapp', contacts: [{ input: to, wa_id: waId }], messages: [{ id: wamid }] });
      }
    }
  }

  /** The body checks of the send endpoint, for the two message types the channel sends. */
  function checkSend(body: Record<string, unknown>): GraphError | undefined {
    if (body.messaging_product !== 'whatsapp') return invalidParameter("The parameter messaging_product is required and must be 'whatsapp'.");
    if (body.recipient_type !== undefined && body.recipient_type !== 'individual') {
      return invalidParameter("Param recipient_type must be 'individual'.");
    }
    if (typeof body.to !== 'string' || !/^\+?\d{5,15}$/.test(body.to)) return invalidParameter('Param to must be a phone number.');
    if (body.type === 'text') return checkText(body.text);
    if (body.type === 'template') return checkTemplate(body.template);
    return invalidParameter(`Param type must be one of the supported message types, not ${JSON.stringify(body.type)}.`);
  }

  function checkText(text: unknown): GraphError | undefined {
    if (!isObject(text) || typeof text.body !== 'string') return invalidParameter("Param text['body'] is required.");
    if (text.preview_url !== undefined && typeof text.preview_url !== 'boolean') return invalidParameter("Param text['preview_url'] must be a boolean.");
    const length = Array.from(text.body).length;
    if (length === 0) return invalidParameter("Param text['body'] must be at least 1 character long.");
    if (length > MAX_TEXT_BODY_CHARS) return invalidParameter(`Param text['body'] must be at most ${MAX_TEXT_BODY_CHARS} characters long.`);
    return undefined;
  }

  function checkTemplate(template: unknown): GraphError | undefined {
    if (!isObject(template) || typeof template.name !== 'string') return invalidParameter("Param template['name'] is required.");
    const language = template.language;
    if (!isObject(language) || typeof language.code !== 'string') return invalidParameter("Param template['language']['code'] is required.");
    const components = template.components ?? [];
    if (!Array.isArray(components) || !components.every(isObject)) return invalidParameter("Param template['components'] must be an array.");
    const bodyParameters: unknown[] = [];
    for (const component of components) {
      if (component.type !== 'body') continue;
      if (!Array.isArray(component.parameters)) return invalidParameter('Param parameters must be an array.');
      bodyParameters.push(...component.parameters);
    }
    for (const parameter of bodyParameters) {
      if (!isObject(parameter) || parameter.type !== 'text' || typeof parameter.text !== 'string' || parameter.text === '') {
        return invalidParameter("Param text is required for parameters of type 'text'.");
      }
      // The API's whitespace policy for parameters.
      if (/[\n\t]| {4,}/.test(parameter.text)) {
        return invalidParameter('Param text cannot have new-line/tab characters or more than 4 consecutive spaces');
      }
    }
    const known = templates.find((t) => t.name === template.name && t.language === language.code);
    if (!known) {
      return {
        status: 404,
        type: 'OAuthException',
        code: 132001,
        message: '(#132001) Template name does not exist in the translation',
        details: `template name (${template.name}) does not exist in ${language.code}`,
      };
    }
    if (bodyParameters.length !== known.bodyParameters) {
      return {
        status: 400,
        type: 'OAuthException',
        code: 132000,
        message: '(#132000) Number of parameters does not match the expected number of params',
        details: `body: number of localizable_params (${bodyParameters.length}) does not match the expected number of params (${known.bodyParameters})`,
      };
    }
    return undefined;
  }

  /** 200 and a body without end: the client has to stop reading. */
  function streamForever(res: ServerResponse) {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    let sent = 0;
    res.on('close', () => {
      if (!closing && sent < OVERSIZED_LIMIT_BYTES) aborted++;
    });
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
    res.write('{"messaging_product":"whatsapp","padding":"');
    const pump = () => {
      while (sent < OVERSIZED_LIMIT_BYTES && !res.destroyed) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      if (!res.destroyed) res.end('"}');
    };
    pump();
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/${version}`,
    messages,
    requestCount: () => requests,
    setMode(mode, modeOptions = {}) {
      const setting: ModeSetting = { mode, retryAfterSeconds: modeOptions.retryAfterSeconds, httpStatus: modeOptions.httpStatus };
      if (modeOptions.to === undefined) defaultMode = setting;
      else modeByRecipient.set(modeOptions.to.replace(/^\+/, ''), setting);
    },
    abortedByClient: () => aborted,
    async close() {
      closing = true;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function invalidParameter(details: string): GraphError {
  return { status: 400, type: 'OAuthException', code: 100, message: '(#100) Invalid parameter', details };
}

function sendError(res: ServerResponse, error: GraphError, headers: Record<string, string> = {}) {
  const body: Record<string, unknown> = { message: error.message, type: error.type, code: error.code };
  if (error.details !== undefined) body.error_data = { messaging_product: 'whatsapp', details: error.details };
  if (error.subcode !== undefined) body.error_subcode = error.subcode;
  body.fbtrace_id = randomBytes(12).toString('base64url');
  sendJson(res, error.status, { error: body }, headers);
}

function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { ...headers, 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify(value));
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REQUEST_BYTES) return void reject(new Error('request body too large'));
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
