/**
 * The uWebSockets.js engine. uWS hands over the request on the stack: everything the handler
 * needs (method, url, headers, peer address) is copied out synchronously, and body chunks are
 * copied as they arrive (their memory is reused after the callback returns).
 *
 * Only the native engine is used. The package's entry point (src/uws.js) requires
 * binaries/uws_<platform>_<arch>_<ABI>.node and, when that fails (Node 22 and 24 have no
 * binary in it), prints to the console and returns a JavaScript emulation on top of node:http,
 * which is slower than our own node:http adapter. So the binary is loaded here by the same name,
 * and without it the caller serves with node:http (gateway/http/index.ts).
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { BodyCollector } from './body.ts';
import { STATUS_TEXT, type HttpHandler, type HttpRequest, type HttpResponse, type HttpServer, type HttpServerOptions } from './adapter.ts';

export type Uws = typeof import('uWebSockets.js');
type UwsResponse = import('uWebSockets.js').HttpResponse;

/** What picks the binary: the package names each one by platform, arch and Node ABI. */
export interface UwsTarget {
  platform: string;
  arch: string;
  /** process.versions.modules: the Node ABI version. */
  modules: string;
  /** process.versions.node, for the message. */
  node: string;
}

/** The native engine, or the reason it cannot run in this process. */
export type UwsProbe = { uws: Uws; reason?: undefined } | { uws?: undefined; reason: string };

const requireHere = createRequire(import.meta.url);
const THIS_PROCESS: UwsTarget = { platform: process.platform, arch: process.arch, modules: process.versions.modules, node: process.versions.node };

/**
 * Loads uWebSockets.js's native binary for `target`, never its emulation. `load` is `require`;
 * tests pass another to play a binary that exists but cannot load (a too-old glibc).
 */
export function probeNativeUws(target: UwsTarget = THIS_PROCESS, load: (path: string) => unknown = requireHere): UwsProbe {
  let file: string;
  try {
    const name = `uws_${target.platform}_${target.arch}_${target.modules}.node`;
    file = join(dirname(requireHere.resolve('uWebSockets.js/package.json')), 'binaries', name);
  } catch (err) {
    return { reason: `uWebSockets.js is not installed (${(err as Error).message.split('\n')[0]})` };
  }
  if (!existsSync(file)) {
    return { reason: `uWebSockets.js has no binary for Node ${target.node} (ABI ${target.modules}) on ${target.platform}-${target.arch}` };
  }
  try {
    return { uws: load(file) as Uws };
  } catch (err) {
    return { reason: `uWebSockets.js's binary for Node ${target.node} does not load here: ${(err as Error).message.split('\n')[0]}` };
  }
}

let thisProcess: UwsProbe | undefined;

/** The probe for this process, made once (every server of the process shares its answer). */
export function nativeUws(): UwsProbe {
  thisProcess ??= probeNativeUws();
  return thisProcess;
}

const decoder = new TextDecoder();

export class UwsHttpServer implements HttpServer {
  readonly engine = 'uws';
  private listenSocket: unknown;

  /** `uws`: the native module (probeNativeUws), never the package's emulation. */
  constructor(private readonly handler: HttpHandler, private readonly options: HttpServerOptions, private readonly uws: Uws) {}

  listen(host: string, port: number): Promise<number> {
    const app = this.uws.App();
    app.any('/*', (res, req) => this.onRequest(res, req));
    return new Promise((resolve, reject) => {
      app.listen(host, port, (socket) => {
        if (!socket) return reject(new Error(`cannot listen on ${host}:${port}`));
        this.listenSocket = socket;
        resolve(this.uws.us_socket_local_port(socket));
      });
    });
  }

  async close(): Promise<void> {
    if (this.listenSocket) this.uws.us_listen_socket_close(this.listenSocket as never);
    this.listenSocket = undefined;
  }

  private onRequest(res: UwsResponse, req: import('uWebSockets.js').HttpRequest): void {
    const headers: Record<string, string> = {};
    req.forEach((name, value) => {
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    });
    const method = req.getCaseSensitiveMethod().toUpperCase();
    const path = req.getUrl();
    const query = req.getQuery() ?? '';
    const remoteAddress = decoder.decode(res.getRemoteAddressAsText());

    let aborted = false;
    let collector: BodyCollector | undefined;
    res.onAborted(() => {
      aborted = true;
      collector?.fail(new Error('client went away'));
    });

    // uWS calls onData only when a body is coming: attach it only then, or body() would hang.
    const length = headers['content-length'] === undefined ? undefined : Number(headers['content-length']);
    const hasBody = headers['transfer-encoding'] !== undefined || (length !== undefined && length > 0);
    if (hasBody) {
      // Reading pauses until the handler takes the body (after admission); never on an aborted
      // response. Only what was paused is resumed: res.resume() on a response uWS was not
      // pausing lost the connection's next request (the client got a reset after the idle timeout).
      const flow = { pause: () => !aborted && res.pause(), resume: () => !aborted && res.resume() };
      collector = new BodyCollector(this.options.maxBodyBytes, Number.isSafeInteger(length) ? length : undefined, flow);
      if (!collector.isSettled) res.onData((chunk, isLast) => collector!.push(new Uint8Array(chunk), isLast));
    }

    const request: HttpRequest = {
      method,
      path,
      query,
      headers,
      remoteAddress,
      // Each request its own empty body: the pipeline may transfer (detach) what it gets.
      body: (allowance) => (collector ? collector.take(allowance) : Promise.resolve(Buffer.allocUnsafeSlow(0))),
    };

    this.handler(request).then(
      (response) => this.answer(res, response, collector, () => aborted),
      () => this.answer(res, { status: 500, body: 'internal error' }, collector, () => aborted),
    );
  }

  /**
   * A body left unread (a refusal at the door) is drained first when its length is announced,
   * and the answer goes out once the client has sent it all: closing under a client still
   * writing makes it fail with EPIPE instead of seeing the answer. Otherwise the connection is
   * closed after the answer.
   */
  private answer(res: UwsResponse, response: HttpResponse, collector: BodyCollector | undefined, aborted: () => boolean): void {
    if (aborted()) return;
    if (!collector || collector.isComplete) return this.send(res, response, collector, false);
    if (!collector.canDrain) return this.send(res, response, collector, true);
    collector.drain().then(
      () => !aborted() && this.send(res, response, collector, false),
      () => !aborted() && this.send(res, response, collector, true),
    );
  }

  private send(res: UwsResponse, response: HttpResponse, collector: BodyCollector | undefined, closeConnection: boolean): void {
    collector?.fail(new Error('response already sent'));
    res.cork(() => {
      res.writeStatus(`${response.status} ${STATUS_TEXT[response.status] ?? ''}`);
      for (const [name, value] of Object.entries(response.headers ?? {})) res.writeHeader(name, value);
      res.end(response.body ?? '', closeConnection);
    });
  }
}
