/**
 * The node:http engine: SLUICE_HTTP_ENGINE=node, the fallback where uWebSockets.js has no
 * native binary (Node 22 and 24), and the bench's second engine. Same handler, same body cap.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BodyCollector } from './body.ts';
import type { HttpHandler, HttpRequest, HttpResponse, HttpServer, HttpServerOptions } from './adapter.ts';

const EMPTY = Buffer.allocUnsafeSlow(0);

export class NodeHttpServer implements HttpServer {
  readonly engine = 'node';
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
      collector = new BodyCollector(this.options.maxBodyBytes, Number.isSafeInteger(length) ? length : undefined);
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
      body: () => (collector ? collector.done : Promise.resolve(EMPTY)),
    };
    this.handler(request)
      .catch((): HttpResponse => ({ status: 500, body: 'internal error' }))
      .then((response) => {
        // A body we stopped reading leaves the connection mid-request: close it after responding.
        const unread = collector !== undefined && !collector.isComplete;
        collector?.fail(new Error('response already sent'));
        if (res.destroyed) return;
        if (unread) res.shouldKeepAlive = false;
        res.writeHead(response.status, response.headers);
        res.end(response.body, () => {
          if (unread) req.socket.destroy();
        });
      });
  }
}
