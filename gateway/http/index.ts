/** The HTTP engines behind one constructor, with the node:http fallback. */
import type { Logger } from '../../core/log.ts';
import type { HttpHandler, HttpServer, HttpServerOptions } from './adapter.ts';
import { NodeHttpServer } from './node.ts';
import { UwsHttpServer } from './uws.ts';

export type { HttpHandler, HttpRequest, HttpResponse, HttpServer } from './adapter.ts';

export function createHttpServer(engine: 'uws' | 'node', handler: HttpHandler, options: HttpServerOptions, log: Logger): HttpServer {
  if (engine === 'uws') {
    try {
      return new UwsHttpServer(handler, options);
    } catch (err) {
      log.warn({ err }, 'uWebSockets.js cannot load on this platform; falling back to node:http');
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
