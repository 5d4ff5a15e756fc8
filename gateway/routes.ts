/**
 * The ingest port's routes. Unknown paths get 404; a known path with another method gets 405
 * with an Allow header.
 */
import { SluiceError } from '../core/errors.ts';
import type { HttpHandler, HttpRequest, HttpResponse } from './http/adapter.ts';
import { errorResponse, otlpHttpHandler, type OtlpHttpDeps } from './otlp-http.ts';

type RouteHandler = (request: HttpRequest) => Promise<HttpResponse>;

const HEALTH = JSON.stringify({ status: 'ok', service: 'sluice-ingest' });

export function ingestRoutes(deps: OtlpHttpDeps): HttpHandler {
  const routes: Record<string, Record<string, RouteHandler>> = {
    '/v1/traces': { POST: otlpHttpHandler('traces', deps) },
    '/v1/metrics': { POST: otlpHttpHandler('metrics', deps) },
    '/v1/logs': { POST: otlpHttpHandler('logs', deps) },
    '/api/v1/health': {
      GET: async () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: HEALTH }),
    },
    '/metrics': {
      GET: async () => ({ status: 200, headers: { 'content-type': deps.metrics.contentType }, body: await deps.metrics.render() }),
    },
  };

  return async (request) => {
    const methods = routes[request.path];
    if (!methods) return errorResponse(new SluiceError('not_found', `no route for ${request.path}`), 'json', deps.log);
    const handler = methods[request.method] ?? (request.method === 'HEAD' ? methods.GET : undefined);
    if (!handler) {
      const response = errorResponse(new SluiceError('method_not_allowed', `${request.method} is not allowed on ${request.path}`), 'json', deps.log);
      response.headers!.allow = Object.keys(methods).join(', ');
      return response;
    }
    return handler(request);
  };
}
