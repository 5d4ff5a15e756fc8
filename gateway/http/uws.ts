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
import { BodyCollector, clientGone } from './body.ts';
import { isPartList, STATUS_TEXT, type HttpHandler, type HttpRequest, type HttpResponse, type HttpServer, type HttpServerOptions } from './adapter.ts';

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

/** LIBUS_LISTEN_EXCLUSIVE_PORT: without it uSockets binds with SO_REUSEPORT, and a second process on the port shares it silently. */
const EXCLUSIVE_PORT = 1;

type UwsApp = import('uWebSockets.js').TemplatedApp & {
  /** listen(host, port, options, cb): in the binary, missing from the package's typings. */
  listen(host: string, port: number, options: number, cb: (socket: unknown) => void): unknown;
  /** Closes the listen sockets and every connection (in the binary, missing from the typings). */
  close(): void;
};

/**
 * How the answer goes out: `keep` the connection; `announced-close`: with `Connection: close`,
 * uWS reading and dropping the rest of the announced body (ending the connection under a client
 * still writing resets it, and the reset loses the answer), the client closing once it read it;
 * `close` right after the answer (a body of unknown length could go on forever).
 */
type Ending = 'keep' | 'announced-close' | 'close';

/**
 * Hands a body over on the next turn of the event loop, unless its request was aborted by then.
 * uWS parses every request of a read before it returns, and closes the connection when one
 * arrives while the one before is unanswered (it refuses async pipelining): that one's answer
 * is lost, so it must not be stored either (its client will send it again).
 */
function afterThisRead(body: Buffer, aborted: () => boolean): Promise<Buffer> {
  return new Promise((resolve, reject) => setImmediate(() => (aborted() ? reject(clientGone()) : resolve(body))));
}

export class UwsHttpServer implements HttpServer {
  readonly engine = 'uws';
  private app: UwsApp | undefined;
  private listenSocket: unknown;
  /** Requests not answered yet (close() waits for them). */
  private readonly unanswered = new Set<UwsResponse>();
  private closing = false;
  private allAnswered: (() => void) | undefined;

  /** `uws`: the native module (probeNativeUws), never the package's emulation. */
  constructor(private readonly handler: HttpHandler, private readonly options: HttpServerOptions, private readonly uws: Uws) {}

  listen(host: string, port: number): Promise<number> {
    const app = this.uws.App() as UwsApp;
    app.any('/*', (res, req) => this.onRequest(res, req));
    return new Promise((resolve, reject) => {
      app.listen(host, port, EXCLUSIVE_PORT, (socket) => {
        if (!socket) return reject(new Error(`cannot listen on ${host}:${port}`));
        this.app = app;
        this.listenSocket = socket;
        resolve(this.uws.us_socket_local_port(socket as never));
      });
    });
  }

  async close(graceMs: number): Promise<void> {
    const app = this.app;
    if (!app) return;
    this.app = undefined;
    this.closing = true;
    this.uws.us_listen_socket_close(this.listenSocket as never);
    if (this.unanswered.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        this.allAnswered = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    // Idle keep-alive connections, and whatever is still unanswered (aborted).
    app.close();
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
    this.unanswered.add(res);

    let aborted = false;
    let collector: BodyCollector | undefined;
    res.onAborted(() => {
      aborted = true;
      this.answered(res);
      collector?.fail(clientGone());
      this.options.log?.debug({ method, path }, 'request aborted: the client closed the connection before its answer');
    });

    // uWS calls onData only when a body is coming: attach it only then, or body() would hang.
    const length = headers['content-length'] === undefined ? undefined : Number(headers['content-length']);
    const hasBody = headers['transfer-encoding'] !== undefined || (length !== undefined && length > 0);
    if (hasBody) {
      // Reading pauses until the handler takes the body (after admission); never on an aborted
      // response. Only what was paused is resumed: res.resume() on a response uWS was not
      // pausing lost the connection's next request (the client got a reset after the idle timeout).
      const flow = { pause: () => !aborted && res.pause(), resume: () => !aborted && res.resume() };
      collector = new BodyCollector(this.options.maxBodyBytes, Number.isSafeInteger(length) ? length : undefined, flow, this.options.bodyDeadline);
      // Even for a body refused at once (over the cap): uWS closes a connection whose body
      // bytes find no handler, before the answer could go out.
      res.onData((chunk, isLast) => collector!.push(new Uint8Array(chunk), isLast));
    }

    const request: HttpRequest = {
      method,
      path,
      query,
      headers,
      remoteAddress,
      get aborted() {
        return aborted;
      },
      // Each request its own empty body: the pipeline may transfer (detach) what it gets.
      body: (allowance) => (collector ? collector.take(allowance).then((body) => afterThisRead(body, () => aborted)) : Promise.resolve(Buffer.allocUnsafeSlow(0))),
    };

    this.handler(request).then(
      (response) => this.answer(res, response, collector, () => aborted),
      () => this.answer(res, { status: 500, body: 'internal error' }, collector, () => aborted),
    );
  }

  /**
   * A body left unread (a refusal at the door) is drained first when its length is announced
   * and within the cap, and the answer goes out once the client has sent it all: the connection
   * stays usable. A body that cannot be drained (over the cap, too slow) gets its answer at once
   * with `Connection: close` while uWS drops the rest of its announced length; a body of unknown
   * length is answered and the connection closed.
   */
  private answer(res: UwsResponse, response: HttpResponse, collector: BodyCollector | undefined, aborted: () => boolean): void {
    if (aborted()) return;
    if (!collector || collector.isComplete) return this.send(res, response, collector, 'keep');
    const unreadEnding: Ending = collector.isAnnounced ? 'announced-close' : 'close';
    if (!collector.canDrain) return this.send(res, response, collector, unreadEnding);
    collector.drain().then(
      () => !aborted() && this.send(res, response, collector, 'keep'),
      () => !aborted() && this.send(res, response, collector, unreadEnding),
    );
  }

  private send(res: UwsResponse, response: HttpResponse, collector: BodyCollector | undefined, ending: Ending): void {
    collector?.fail(new Error('response already sent'));
    this.answered(res);
    // While closing, every answer ends its connection.
    const close = ending === 'close' || (this.closing && ending === 'keep');
    res.cork(() => {
      res.writeStatus(`${response.status} ${STATUS_TEXT[response.status] ?? ''}`);
      for (const [name, value] of Object.entries(response.headers ?? {})) res.writeHeader(name, value);
      if (ending === 'announced-close') res.writeHeader('connection', 'close');
      // uWS copies what the socket does not take at once into its own buffer: parts are joined here.
      res.end(isPartList(response.body) ? Buffer.concat(response.body) : response.body ?? '', close);
    });
  }

  private answered(res: UwsResponse): void {
    this.unanswered.delete(res);
    if (this.unanswered.size === 0) this.allAnswered?.();
  }
}
