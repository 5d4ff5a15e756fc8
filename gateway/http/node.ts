/**
 * The node:http engine: SLUICE_HTTP_ENGINE=node, the fallback where uWebSockets.js has no
 * native binary (Node 22 and 24), and the bench's second engine. Same handler, same body cap.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { BodyCollector, clientGone } from './body.ts';
import { isPartList, type HttpHandler, type HttpRequest, type HttpResponse, type HttpServer, type HttpServerOptions } from './adapter.ts';

/** Marks the end of a body; never handed out (a body may be transferred to a worker, detaching it). */
const END = new Uint8Array(0);

/** How long a connection whose body we refused stays open for the client to read the answer. */
const LINGER_MS = 5000;

/**
 * Timeouts set here rather than left to Node's defaults (which changed between versions):
 * a request head must arrive within 10 s (checked every 2 s), an idle keep-alive connection is
 * closed after 10 s (as uWebSockets.js does). Bodies have the BodyDeadline of their own instead
 * of Node's requestTimeout, which would cut a long upload at any rate.
 */
const HEADERS_TIMEOUT_MS = 10_000;
const KEEP_ALIVE_TIMEOUT_MS = 10_000;
const TIMEOUT_CHECK_INTERVAL_MS = 2_000;

export class NodeHttpServer implements HttpServer {
  readonly engine = 'node';
  private server: Server | undefined;
  private closing = false;

  constructor(private readonly handler: HttpHandler, private readonly options: HttpServerOptions) {}

  listen(host: string, port: number): Promise<number> {
    const server = createServer(
      { keepAlive: true, headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: 0, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS },
      (req, res) => this.onRequest(req, res),
    );
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    // Past it, node:http closes new connections as soon as they are accepted.
    server.maxConnections = this.options.maxConnections;
    this.server = server;
    return new Promise((resolve, reject) => {
      // Worded as the uWebSockets.js engine's, with the reason (EADDRINUSE, EACCES) after it.
      server.once('error', (err: NodeJS.ErrnoException) => reject(new Error(`cannot listen on ${host}:${port}: ${err.code ?? err.message}`, { cause: err })));
      server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
    });
  }

  async close(graceMs: number): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    this.closing = true;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const timer = setTimeout(() => server.closeAllConnections(), graceMs);
    await closed;
    clearTimeout(timer);
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const method = (req.method ?? 'GET').toUpperCase();
    const path = q < 0 ? url : url.slice(0, q);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    const length = headers['content-length'] === undefined ? undefined : Number(headers['content-length']);
    const hasBody = headers['transfer-encoding'] !== undefined || (length !== undefined && length > 0);
    let collector: BodyCollector | undefined;
    let answered = false;
    let aborted = false;
    res.on('close', () => {
      if (res.writableFinished) return;
      aborted = true;
      collector?.fail(clientGone());
      this.options.log?.debug({ method, path }, 'request aborted: the client closed the connection before its answer');
    });
    if (hasBody) {
      // Reading pauses until the handler takes the body (after admission).
      const flow = { pause: () => req.pause(), resume: () => req.resume() };
      collector = new BodyCollector(this.options.maxBodyBytes, Number.isSafeInteger(length) ? length : undefined, flow, this.options.bodyDeadline);
      req.on('data', (chunk: Buffer) => {
        // Once answered, the rest of a refused body is read and dropped (see lingerOnClose).
        if (!collector!.push(chunk, false) && !answered) req.pause();
      });
      req.on('end', () => collector!.push(END, true));
      req.on('error', (err) => collector!.fail(err));
    }
    const request: HttpRequest = {
      method,
      path,
      query: q < 0 ? '' : url.slice(q + 1),
      headers,
      remoteAddress: req.socket.remoteAddress ?? '',
      get aborted() {
        return aborted;
      },
      // Each request its own empty body: the pipeline may transfer (detach) what it gets.
      body: (allowance) => (collector ? collector.take(allowance) : Promise.resolve(Buffer.allocUnsafeSlow(0))),
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
        if (unread && !close) {
          collector!.drain().catch(() => req.socket.destroy());
          req.resume(); // paused when the body was refused (see the 'data' handler)
        } else {
          collector?.fail(new Error('response already sent'));
        }
        if (res.destroyed) return;
        answered = true;
        if (close) {
          res.shouldKeepAlive = false; // `Connection: close`
          lingerOnClose(req);
        } else if (this.closing) {
          res.shouldKeepAlive = false; // the server is stopping: no next request on this connection
        }
        const { body } = response;
        if (!isPartList(body)) {
          res.writeHead(response.status, response.headers);
          res.end(body);
          return;
        }
        // Each part is queued as it is (the socket writes them as it can), none copied into one.
        res.writeHead(response.status, { 'content-length': String(body.reduce((sum, part) => sum + part.byteLength, 0)), ...response.headers });
        for (const part of body) res.write(part);
        res.end();
      });
  }
}

/**
 * How a connection whose request body was not read to the end is closed. node:http ends a
 * `Connection: close` response with socket.destroySoon(): FIN, then destroy as soon as it is
 * flushed. With the client still sending, that destroy resets the connection, and a reset makes
 * the client's kernel drop the answer it has not read yet: it sees ECONNRESET, not the 413.
 * Instead (as uWebSockets.js does): FIN after the answer, the rest of the body read and dropped,
 * the socket destroyed when the client closes or after LINGER_MS. (node:http calls destroySoon
 * when a socket has it and end() otherwise: both Node 20 and 24.)
 */
function lingerOnClose(req: IncomingMessage): void {
  const socket = req.socket as Socket & { destroySoon?: () => void };
  socket.destroySoon = () => {
    const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref();
    socket.once('close', () => clearTimeout(timer));
    socket.end();
    req.resume();
  };
}
