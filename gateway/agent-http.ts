/**
 * The agent API on the ingest port: log and metric batches, heartbeats, deploy markers (all
 * POSTed JSON, run through the worker pool and the bus like OTLP), the pushed agent config
 * (GET, answered from memory with an ETag), and the install manifest behind an install token.
 *
 * Every answer is JSON; errors are `{"error": code, "message": text, "statusCode": status}`.
 * Each endpoint takes the per-IP token bucket first, as OTLP does.
 */
import { SluiceError, toSluiceError } from '../core/errors.ts';
import type { Logger } from '../core/log.ts';
import type { SignalLabel, SluiceMetrics } from '../core/metrics.ts';
import type { IngestService } from '../pipeline/ingest.ts';
import type { AgentKind } from '../pipeline/agent/schemas.ts';
import type { IngestTally } from '../pipeline/ingest-tally.ts';
import { etagMatches, type AgentConfigs } from './agent-configs.ts';
import { MANIFEST_CONTENT_TYPES, MANIFEST_FORMATS, renderManifest, type ManifestFormat } from './agent-manifest.ts';
import type { HttpRequest, HttpResponse } from './http/adapter.ts';
import type { InstallTokens } from './install-tokens.ts';
import { admit, rateLimit, refusedSource, statusLabel, withAdmittedBody, type IngestGuards } from './otlp-http.ts';

export interface AgentHttpDeps extends IngestGuards {
  ingest: IngestService;
  /** Counts each ingest request per source for the console (ingest_counts). */
  tally: IngestTally;
  configs: AgentConfigs;
  installTokens: InstallTokens;
  /** Base URL agents reach this ingest port at (SLUICE_PUBLIC_URL, or this host). */
  publicUrl: () => string;
  metrics: SluiceMetrics;
  log: Logger;
}

type Handler = (request: HttpRequest) => Promise<HttpResponse>;

const JSON_TYPE = 'application/json';

/** The agent API's routes, for the ingest port's router. `/install/*` takes the token as its last segment. */
export function agentRoutes(deps: AgentHttpDeps): Record<string, Record<string, Handler>> {
  return {
    '/api/v1/ingest': { POST: ingestHandler('logs', 'agent_logs', deps) },
    '/api/v1/metrics/ingest': { POST: ingestHandler('metrics', 'agent_metrics', deps) },
    '/api/v1/heartbeat': { POST: ingestHandler('heartbeat', 'heartbeats', deps) },
    '/api/v1/webhooks/deploy': { POST: ingestHandler('deploy', 'deploys', deps) },
    '/api/v1/agent/config': { GET: counted('agent_config', deps, configHandler(deps)) },
    '/install/*': { GET: counted('install', deps, installHandler(deps)) },
  };
}

/** Counts the request and turns any error into the agent API's JSON error. */
function counted(signal: string, deps: AgentHttpDeps, handler: Handler): Handler {
  return async (request) => {
    let response: HttpResponse;
    try {
      response = await handler(request);
    } catch (err) {
      response = agentErrorResponse(err, deps.log);
    }
    deps.metrics.requests.inc({ protocol: 'http', signal, status: statusLabel(request, response) });
    return response;
  };
}

function ingestHandler(payload: AgentKind, signal: SignalLabel, deps: AgentHttpDeps): Handler {
  return counted(signal, deps, async (request) => {
    const admitted = { sourceId: '' };
    try {
      requireJson(request);
      const outcome = await withAdmittedBody(deps, request, admitted, (taken) => deps.ingest.ingestAgent({ payload, ...taken }));
      const answer: Record<string, unknown> = { accepted: outcome.accepted };
      // A heartbeat learns whether its config changed without a second request.
      if (payload === 'heartbeat') answer.configEtag = deps.configs.current(admitted.sourceId).etag;
      deps.tally.accepted(admitted.sourceId, signal, outcome.accepted, outcome.rejected);
      return json(200, answer);
    } catch (err) {
      deps.tally.refused(refusedSource(deps.auth, admitted.sourceId, err, request.headers), signal, err);
      throw err;
    }
  });
}

function configHandler(deps: AgentHttpDeps): Handler {
  return async (request) => {
    // The key alone decides the source: no parameter can name another one.
    const sourceId = await admit(deps, request);
    const { body, etag } = deps.configs.current(sourceId);
    const headers = { etag, 'cache-control': 'private, no-cache' };
    if (etagMatches(request.headers['if-none-match'], etag)) return { status: 304, headers };
    return { status: 200, headers: { ...headers, 'content-type': JSON_TYPE }, body };
  };
}

function installHandler(deps: AgentHttpDeps): Handler {
  return async (request) => {
    await rateLimit(deps, request);
    const token = decodeURIComponentSafe(request.path.slice('/install/'.length));
    const format = manifestFormat(request.query);
    const grant = token === undefined ? undefined : await deps.installTokens.redeem(token);
    // Unknown, expired and revoked tokens get the same answer: no hint which.
    if (!grant) throw new SluiceError('not_found', 'no such install token');
    const manifest = renderManifest(format, {
      endpoint: deps.publicUrl(),
      apiKey: grant.apiKey,
      sourceId: grant.sourceId,
      tokenExpiresAt: grant.expiresAt,
    });
    return {
      status: 200,
      headers: { 'content-type': MANIFEST_CONTENT_TYPES[format], 'cache-control': 'no-store' },
      body: manifest,
    };
  };
}

function manifestFormat(query: string): ManifestFormat {
  const requested = new URLSearchParams(query).get('format') ?? 'kubernetes';
  if (!(MANIFEST_FORMATS as readonly string[]).includes(requested)) {
    throw new SluiceError('bad_request', `format must be one of ${MANIFEST_FORMATS.join(', ')}`);
  }
  return requested as ManifestFormat;
}

function decodeURIComponentSafe(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

function requireJson(request: HttpRequest): void {
  const mediaType = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (mediaType !== JSON_TYPE) throw new SluiceError('unsupported_media_type', 'Content-Type must be application/json');
}

function json(status: number, value: unknown): HttpResponse {
  return { status, headers: { 'content-type': JSON_TYPE }, body: JSON.stringify(value) };
}

/** The agent API's error body. */
export function agentErrorResponse(err: unknown, log: Logger): HttpResponse {
  const error = toSluiceError(err);
  if (error.code === 'internal') log.error({ err: error.cause ?? error }, 'request failed unexpectedly');
  const response = json(error.httpStatus, { error: error.code, message: error.message, statusCode: error.httpStatus });
  if (error.retryAfterSeconds !== undefined) response.headers!['retry-after'] = String(error.retryAfterSeconds);
  return response;
}
