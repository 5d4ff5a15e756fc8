/**
 * The gRPC port's connections, each one HTTP/2 session. Every one costs a file descriptor and
 * some memory whatever its client does, so each is bounded: at most maxConnections at once
 * (net.Server closes the rest at accept), a deadline for the client's HTTP/2 preface, and an
 * idle deadline while no call is open (pings do not count). At shutdown every connection gets
 * GOAWAY at once (no new calls), calls in flight get a grace, and the rest are cancelled.
 */
import { constants, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import type { SluiceMetrics } from '../../core/metrics.ts';
import type { GrpcLimits, Limit } from './limits.ts';

/** How long an ended connection may take to flush and close before its socket is destroyed. */
const LINGER_MS = 1000;

export type CallHandler = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, connection: Connection) => void;

/** One client connection: its open calls, the message bytes they hold, its deadlines. */
/**
 * Resets a stream (RST_STREAM `code`) and drops what the client sent that nobody read: on Node 24
 * a stream paused with bytes unread never emits 'close', so its connection would never be idle.
 */
export function closeStream(stream: ServerHttp2Stream, code: number): void {
  stream.resume();
  stream.close(code);
}

export class Connection {
  readonly calls = new Set<ServerHttp2Stream>();
  /** Message bytes its calls hold (taken from the process's budget as well). */
  heldBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  /** GOAWAY sent: it ends when its last call does. */
  private draining = false;

  constructor(
    private readonly session: ServerHttp2Session,
    /** The session's own socket (session.socket is a proxy that may not destroy it). */
    private readonly socket: Socket,
    private readonly limits: GrpcLimits,
    private readonly reached: (limit: Limit) => void,
    onCall: CallHandler,
  ) {
    this.timer = setTimeout(() => {
      reached('handshake_timeout');
      this.end();
    }, limits.handshakeTimeoutMs);
    session.once('remoteSettings', () => this.whenIdle());
    session.on('stream', (stream, headers) => {
      this.calls.add(stream);
      clearTimeout(this.timer);
      stream.once('close', () => {
        this.calls.delete(stream);
        if (this.calls.size === 0) this.whenIdle();
      });
      onCall(stream, headers, this);
    });
    // A broken connection ends through 'close'; nothing to answer.
    session.on('error', () => {});
    session.once('close', () => clearTimeout(this.timer));
  }

  get remoteAddress(): string {
    return this.socket.remoteAddress ?? '';
  }

  /** GOAWAY: the calls in flight go on, the client opens no new ones here. */
  drain(): void {
    if (this.draining || this.session.destroyed) return;
    this.draining = true;
    this.session.goaway(constants.NGHTTP2_NO_ERROR);
    if (this.calls.size === 0) this.end();
  }

  /** Cancels the calls still open (RST_STREAM CANCEL: the client sees CANCELLED) and ends the connection. */
  cancel(): void {
    for (const call of this.calls) closeStream(call, constants.NGHTTP2_CANCEL);
    this.end();
  }

  private whenIdle(): void {
    clearTimeout(this.timer);
    if (this.session.destroyed) return;
    if (this.draining) return this.end();
    this.timer = setTimeout(() => {
      this.reached('idle_timeout');
      this.drain();
    }, this.limits.idleTimeoutMs);
  }

  /** Flushes what is queued (GOAWAY, resets), then closes the socket: at once if the peer does not let it flush. */
  private end(): void {
    clearTimeout(this.timer);
    if (this.session.destroyed) return;
    this.session.destroy();
    const linger = setTimeout(() => this.socket.destroy(), LINGER_MS);
    this.socket.once('close', () => clearTimeout(linger));
  }
}

/** The connections of one port, from accept to shutdown. */
export class Connections {
  private readonly open = new Set<Connection>();

  constructor(
    private readonly server: Http2Server,
    limits: GrpcLimits,
    metrics: SluiceMetrics,
    reached: (limit: Limit) => void,
    onCall: CallHandler,
  ) {
    if (limits.maxConnections > 0) server.maxConnections = limits.maxConnections;
    server.on('drop', () => reached('max_connections'));
    // Node's own 'connection' listener makes the session and emits 'session' before it
    // returns: the socket seen just before a session is that session's.
    let accepted: Socket | undefined;
    server.prependListener('connection', (socket: Socket) => {
      accepted = socket;
    });
    server.on('session', (session) => {
      const socket = accepted!;
      accepted = undefined;
      const connection = new Connection(session, socket, limits, reached, onCall);
      this.open.add(connection);
      metrics.grpcConnections.inc();
      socket.once('close', () => {
        this.open.delete(connection);
        metrics.grpcConnections.dec();
      });
    });
  }

  /**
   * Stops accepting connections and calls at once (GOAWAY), lets the calls in flight finish
   * within `graceMs`, then cancels the rest; resolves when no connection is left.
   */
  async close(graceMs: number): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const connection of this.open) connection.drain();
    const cancel = setTimeout(() => {
      for (const connection of this.open) connection.cancel();
    }, graceMs);
    await closed;
    clearTimeout(cancel);
  }
}
