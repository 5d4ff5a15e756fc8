/**
 * The node:http engine: the fallback when uWebSockets.js cannot load, and the bench's
 * second engine. Same handler, same body cap.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BodyCollector } from './body.ts';
import type { HttpHandler, HttpRequest, HttpResponse, HttpServer, HttpServerOptions } from './adapter.ts';

const EMPTY = Buffer.allocUnsafeSlow(0);

export class NodeHttpServer implements HttpServer {
  private server: Server | undefined;

  constructor(private readonly handler: HttpHandler, private readonly options: HttpServerOptions) {}

  listen(host: string, port: number): Promise<number> {
    const server = createServer({ keepAlive: true }, (req, res) => this.onRequest(req, res));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
    });
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    const length = headers['content-length'] === undefined ? undefined : Number(headers['content-length']);
    const hasBody = headers['transfer-encoding'] !== undefined || (length !== undefined && length > 0);
    let collector: BodyCollector | undefined;
    if (hasBody) {
      // Reading pauses until the handler takes the body (after admission).
      const flow = { pause: () => req.pause(), resume: () => req.resume() };
      collector = new BodyCollector(this.options.maxBodyBytes, Number.isSafeInteger(length) ? length : undefined, flow);
      req.on('data', (chunk: Buffer) => {
        if (!collector!.push(chunk, false)) req.pause();
      });
      req.on('end', () => collector!.push(EMPTY, true));
      req.on('error', (err) => collector!.fail(err));
      req.on('aborted', () => collector!.fail(new Error('client went away')));
    }
    const request: HttpRequest = {
      method: (req.method ?? 'GET').toUpperCase(),
      path: q < 0 ? url : url.slice(0, q),
      query: q < 0 ? '' : url.slice(q + 1),
      headers,
      remoteAddress: req.socket.remoteAddress ?? '',
      body: (allowance) => (collector ? collector.take(allowance) : Promise.resolve(EMPTY)),
    };
    this.handler(request)
      .catch((): HttpResponse => ({ status: 500, body: 'internal error' }))
      .then((response) => {
        // A body left unread (a refusal at the door): the rest of an announced length is read
        // and dropped while the answer goes out, so the client can finish sending and read it
        // (closing under a client still writing makes it fail with EPIPE, not see the 503);
        // anything else is closed.
        const unread = collector !== undefined && !collector.isComplete;
        const close = unread && collector?.canDrain !== true;
        if (unread && !close) collector!.drain().catch(() => req.socket.destroy());
        else collector?.fail(new Error('response already sent'));
        if (res.destroyed) return;
        if (close) res.shouldKeepAlive = false;
        res.writeHead(response.status, response.headers);
        res.end(response.body, () => {
          if (close) req.socket.destroy();
        });
      });
  }
}
