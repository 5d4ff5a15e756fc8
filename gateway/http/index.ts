/** The HTTP engines behind one constructor, with the node:http fallback. */
import type { Logger } from '../../core/log.ts';
import type { HttpHandler, HttpServer, HttpServerOptions } from './adapter.ts';
import { NodeHttpServer } from './node.ts';
import { nativeUws, UwsHttpServer, type UwsProbe } from './uws.ts';

export type { HttpHandler, HttpRequest, HttpResponse, HttpServer } from './adapter.ts';

/** Probes whose fallback was already logged: one line per process, not one per server. */
const announced = new WeakSet<UwsProbe>();

/**
 * The configured engine: uWebSockets.js when its native binary runs in this process, otherwise
 * node:http, said once in a warning. `uws` is this process's probe; tests pass their own.
 */
export function createHttpServer(engine: 'uws' | 'node', handler: HttpHandler, options: HttpServerOptions, log: Logger, uws: UwsProbe = nativeUws()): HttpServer {
  options = { ...options, log };
  if (engine === 'uws') {
    if (uws.uws) return new UwsHttpServer(handler, options, uws.uws);
    if (!announced.has(uws)) {
      announced.add(uws);
      log.warn({ reason: uws.reason }, `${uws.reason}: serving HTTP with node:http (SLUICE_HTTP_ENGINE=node chooses it without this warning)`);
    }
  }
  return new NodeHttpServer(handler, options);
}

/** Listens, or fails saying which port it was and which setting moves it. */
export async function listenOn(server: { listen(host: string, port: number): Promise<number> }, host: string, port: number, what: string): Promise<number> {
  try {
    return await server.listen(host, port);
  } catch (err) {
    throw new Error(`${what}: ${(err as Error).message} (is the port in use?)`, { cause: err });
  }
}
