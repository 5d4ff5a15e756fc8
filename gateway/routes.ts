/**
 * The ingest port's routes. Unknown paths get 404; a known path with another method gets 405
 * with an Allow header.
 */
import { SluiceError } from '../core/errors.ts';
import type { Logger } from '../core/log.ts';
import type { SluiceMetrics } from '../core/metrics.ts';
import type { Readiness } from '../core/readiness.ts';
import type { HttpHandler, HttpRequest, HttpResponse } from './http/adapter.ts';
import { DOCS_ASSETS_PATH, docsAsset, docsPage } from '../core/api-docs.ts';
import { agentErrorResponse, agentRoutes, type AgentHttpDeps } from './agent-http.ts';
import { openApiDocument } from './openapi.ts';
import { errorResponse, otlpHttpHandler, type OtlpHttpDeps } from './otlp-http.ts';

type RouteHandler = (request: HttpRequest) => Promise<HttpResponse>;

const HEALTH = JSON.stringify({ status: 'ok', service: 'sluice-ingest' });

type RouteTable = Record<string, Record<string, RouteHandler>>;

/** What every role answers without a key: liveness, readiness and /metrics. */
export interface OpsDeps {
  metrics: SluiceMetrics;
  readiness: Readiness;
  log: Logger;
}

function opsTable({ metrics, readiness }: OpsDeps): RouteTable {
  return {
    '/api/v1/health': {
      GET: async () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: HEALTH }),
    },
    // Readiness: 503 while any component cannot do its work (for load balancers and orchestrators).
    '/api/v1/ready': {
      GET: async () => {
        const report = await readiness.report();
        const body = JSON.stringify({ status: report.ready ? 'ready' : 'not ready', components: report.components });
        return { status: report.ready ? 200 : 503, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' }, body };
      },
    },
    '/metrics': { GET: metricsHandler(metrics) },
  };
}

/** GET /metrics: the process's metrics in Prometheus text format (served on every HTTP port, without a key). */
export function metricsHandler(metrics: SluiceMetrics): HttpHandler {
  return async () => ({ status: 200, headers: { 'content-type': metrics.contentType }, body: await metrics.render() });
}

/** The ingest port of a front end: OTLP/HTTP, the agent API, its OpenAPI document, health and metrics. */
export function ingestRoutes(deps: OtlpHttpDeps & AgentHttpDeps & OpsDeps): HttpHandler {
  const document = openApiDocument();
  const openApi = JSON.stringify(document);
  return router(
    {
      '/v1/traces': { POST: otlpHttpHandler('traces', deps) },
      '/v1/metrics': { POST: otlpHttpHandler('metrics', deps) },
      '/v1/logs': { POST: otlpHttpHandler('logs', deps) },
      ...agentRoutes(deps),
      '/api/v1/openapi.json': {
        GET: async () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: openApi }),
      },
      '/api/v1/docs': { GET: () => docsPage(document.info.title) },
      [`${DOCS_ASSETS_PATH}*`]: {
        GET: async (request) => {
          const name = request.path.slice(DOCS_ASSETS_PATH.length);
          return (await docsAsset(name)) ?? agentErrorResponse(new SluiceError('not_found', `no docs asset ${name}`), deps.log);
        },
      },
      ...opsTable(deps),
    },
    deps.log,
  );
}

/** The HTTP port of a role without a front end (`sluice consume`). */
export function opsRoutes(deps: OpsDeps): HttpHandler {
  return router(opsTable(deps), deps.log);
}

/** Routes by exact path; a key ending in `/*` takes any one last segment (e.g. `/install/*`). */
function router(routes: RouteTable, log: Logger): HttpHandler {
  return async (request) => {
    const lastSlash = request.path.lastIndexOf('/');
    const methods = routes[request.path] ?? (lastSlash > 0 && lastSlash < request.path.length - 1 ? routes[`${request.path.slice(0, lastSlash)}/*`] : undefined);
    if (!methods) return errorResponse(new SluiceError('not_found', `no route for ${request.path}`), 'json', log);
    const handler = methods[request.method] ?? (request.method === 'HEAD' ? methods.GET : undefined);
    if (!handler) {
      const response = errorResponse(new SluiceError('method_not_allowed', `${request.method} is not allowed on ${request.path}`), 'json', log);
      response.headers!.allow = Object.keys(methods).join(', ');
      return response;
    }
    return handler(request);
  };
}
