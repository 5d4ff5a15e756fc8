/**
 * What the JSON APIs on Sluice's ports share (the relay's, the console's): path patterns, the
 * JSON body read within the byte budget, and the one mapping of an error to
 * `{ "message", "statusCode" }` plus Retry-After where the error says when to come back.
 */
import type { ByteBudget } from '../../core/byte-budget.ts';
import { ApiError, SluiceError } from '../../core/errors.ts';
import { nestedDeeperThan } from '../../core/json-depth.ts';
import type { Logger } from '../../core/log.ts';
import type { HttpRequest, HttpResponse } from './adapter.ts';

export const JSON_TYPE = 'application/json';
const MAX_BODY_DEPTH = 32;

/** The parameters of `path` when it matches `pattern` (`/api/sources/:id`), else undefined. */
export function matchPath(pattern: string, path: string): Record<string, string> | undefined {
  const want = pattern.split('/');
  const got = path.split('/');
  if (want.length !== got.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i]!.startsWith(':')) {
      if (!got[i]) return undefined;
      try {
        params[want[i]!.slice(1)] = decodeURIComponent(got[i]!);
      } catch {
        return undefined;
      }
    } else if (want[i] !== got[i]) {
      return undefined;
    }
  }
  return params;
}

/**
 * The JSON body; undefined for an empty body without a Content-Type (a POST that takes none).
 * Its bytes count in the byte budget while they arrive (503 + Retry-After when it is used up),
 * as the ingest endpoints' do; the parsed value is small beside the held uploads the budget is for.
 */
export async function readJsonBody(request: HttpRequest, budget: ByteBudget): Promise<unknown> {
  const reservation = budget.reserve(0);
  let raw: Buffer;
  try {
    raw = await request.body(reservation);
  } finally {
    reservation.release();
  }
  const contentType = request.headers['content-type'];
  if (raw.length === 0 && !contentType) return undefined;
  if (contentType?.split(';')[0]?.trim().toLowerCase() !== JSON_TYPE) throw new ApiError(415, 'Content-Type must be application/json');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
  } catch {
    throw new ApiError(400, 'Body is not valid UTF-8');
  }
  // What walks a body afterwards (validation, templates, JSON.stringify) recurses.
  if (nestedDeeperThan(text, MAX_BODY_DEPTH)) throw new ApiError(400, `Body is nested deeper than ${MAX_BODY_DEPTH} levels`);
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(400, 'Body is not valid JSON');
  }
}

/**
 * The one mapping of an error to a JSON API's answer. `headers` are added (CORS on the relay's
 * public endpoints, the console's security headers); `api` names the API in log lines.
 */
export function apiErrorResponse(err: unknown, log: Logger, api: string, headers: Record<string, string> = {}): HttpResponse {
  const error = apiError(err, log, api);
  const { retryAfterSeconds, ...details } = error.details as { retryAfterSeconds?: number };
  const all: Record<string, string> = { ...headers, 'content-type': JSON_TYPE };
  if (retryAfterSeconds !== undefined) all['retry-after'] = String(retryAfterSeconds);
  return { status: error.statusCode, headers: all, body: JSON.stringify({ message: error.message, statusCode: error.statusCode, ...details }) };
}

function apiError(err: unknown, log: Logger, api: string): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof SluiceError && err.code !== 'internal') {
    const retry = err.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: err.retryAfterSeconds };
    if (err.httpStatus !== 503) return new ApiError(err.httpStatus, err.message, retry);
    // Storage, the bus or the memory budget: the caller only needs to know to come back.
    log.warn({ err: err.message }, `${api} request refused: the service is unavailable`);
    return new ApiError(503, 'Service temporarily unavailable. Please try again.', { retryAfterSeconds: err.retryAfterSeconds ?? 5 });
  }
  log.error({ err }, `${api} request failed unexpectedly`);
  return new ApiError(500, 'Internal server error');
}
