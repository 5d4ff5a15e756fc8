/**
 * Clients that misbehave, one attempt each, for the soak run (bench/soak.ts): each holds or
 * abuses a connection the way an attacker or a broken exporter does, for at most `holdMs`, and
 * says how the server answered. None needs anything but the target's ports and a valid key.
 */
import { randomBytes } from 'node:crypto';
import { connect as connectHttp2 } from 'node:http2';
import { connect as connectTcp, type Socket } from 'node:net';
import { gzipSync } from 'node:zlib';

export interface HostileTarget {
  host: string;
  httpPort: number;
  grpcPort: number;
  apiKey: string;
}

/** How one attempt ended: `answered:<status>` (HTTP status or grpc-status), `closed` (by the server), `held` (still open at holdMs). */
export type HostileOutcome = string;

export type HostileKind = (target: HostileTarget, holdMs: number) => Promise<HostileOutcome>;

const GRPC_TRACES = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

/** Decompresses to 100 MiB of zeros (about 100 KiB on the wire). */
const BOMB = gzipSync(Buffer.alloc(100 * 1024 * 1024));

/** Raw HTTP/1.1 on one socket: writes `head` (and then what `feed` sends), resolves with the first status line or how it ended. */
function rawHttp(target: HostileTarget, holdMs: number, head: string, feed?: (socket: Socket) => () => void): Promise<HostileOutcome> {
  return new Promise((resolve) => {
    const socket = connectTcp(target.httpPort, target.host);
    let stopFeeding = () => {};
    let received = '';
    const finish = (outcome: HostileOutcome) => {
      clearTimeout(timer);
      stopFeeding();
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish('held'), holdMs);
    socket.on('connect', () => {
      socket.write(head);
      if (feed) stopFeeding = feed(socket);
    });
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(received)?.[1];
      if (status) finish(`answered:${status}`);
    });
    socket.on('error', () => finish('closed'));
    socket.on('close', () => finish('closed'));
  });
}

function post(target: HostileTarget, path: string, headers: Record<string, string | number>): string {
  const lines = Object.entries({ host: `${target.host}:${target.httpPort}`, 'x-api-key': target.apiKey, ...headers }).map(([name, value]) => `${name}: ${value}`);
  return `POST ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`;
}

/** A gRPC Export on its own HTTP/2 connection: headers, then `message` written and the stream left open. */
function grpcStream(target: HostileTarget, holdMs: number, metadata: Record<string, string>, message: Buffer): Promise<HostileOutcome> {
  return new Promise((resolve) => {
    const session = connectHttp2(`http://${target.host}:${target.grpcPort}`);
    let settled = false;
    const finish = (outcome: HostileOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      session.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish('held'), holdMs);
    session.on('error', () => finish('closed'));
    session.on('close', () => finish('closed'));
    const stream = session.request({ ':method': 'POST', ':path': GRPC_TRACES, 'content-type': 'application/grpc', te: 'trailers', ...metadata });
    stream.on('error', () => finish('closed'));
    let status: string | undefined;
    const onHeaders = (headers: Record<string, unknown>) => {
      if (headers['grpc-status'] !== undefined) status = String(headers['grpc-status']);
    };
    stream.on('response', onHeaders);
    stream.on('trailers', onHeaders);
    stream.on('close', () => finish(status === undefined ? 'closed' : `answered:grpc-${status}`));
    stream.resume();
    stream.write(message);
  });
}

/** A gRPC length prefix announcing `length` bytes, and `sent` of them. */
function stalledMessage(length: number, sent: number): Buffer {
  const message = Buffer.alloc(5 + sent);
  message.writeUInt32BE(length, 1);
  return message;
}

export const HOSTILE_KINDS: Record<string, HostileKind> = {
  /** A valid key, 2 MiB announced, 100 bytes every half second. */
  slowBody: (target, holdMs) =>
    rawHttp(target, holdMs, post(target, '/v1/traces', { 'content-type': 'application/x-protobuf', 'content-length': 2 * 1024 * 1024 }), (socket) => {
      const drip = setInterval(() => socket.write(Buffer.alloc(100)), 500);
      return () => clearInterval(drip);
    }),
  /** No key: a gRPC message announced at ~10 MiB, 64 KiB of it sent, then nothing. */
  grpcStallWithoutKey: (target, holdMs) => grpcStream(target, holdMs, {}, stalledMessage(10 * 1024 * 1024 - 16, 64 * 1024)),
  /** A valid key: the same stall. */
  grpcStallWithKey: (target, holdMs) => grpcStream(target, holdMs, { 'x-api-key': target.apiKey }, stalledMessage(10 * 1024 * 1024 - 16, 64 * 1024)),
  /** A TCP connection to the gRPC port that never says anything. */
  idleGrpc: (target, holdMs) => idle(target.grpcPort, target.host, holdMs),
  /** A TCP connection to the HTTP port that never says anything. */
  idleHttp: (target, holdMs) => idle(target.httpPort, target.host, holdMs),
  /** Random bytes as a protobuf body: a 400, never a 5xx. */
  garbage: (target, holdMs) => {
    const body = randomBytes(2048);
    return rawHttp(target, holdMs, post(target, '/v1/traces', { 'content-type': 'application/x-protobuf', 'content-length': body.length }), (socket) => {
      socket.write(body);
      return () => {};
    });
  },
  /** A body announced over the cap: a readable 413. */
  oversize: (target, holdMs) =>
    rawHttp(target, holdMs, post(target, '/v1/traces', { 'content-type': 'application/x-protobuf', 'content-length': 64 * 1024 * 1024 }), (socket) => {
      const flood = setInterval(() => socket.write(Buffer.alloc(64 * 1024)), 10);
      return () => clearInterval(flood);
    }),
  /** gzip that inflates to 100 MiB: a 413. */
  bomb: (target, holdMs) =>
    rawHttp(target, holdMs, post(target, '/v1/traces', { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip', 'content-length': BOMB.length }), (socket) => {
      socket.write(BOMB);
      return () => {};
    }),
  /** Half a body, then the client goes away. */
  abort: (target) =>
    new Promise((resolve) => {
      const socket = connectTcp(target.httpPort, target.host, () => {
        socket.write(post(target, '/v1/traces', { 'content-type': 'application/x-protobuf', 'content-length': 1024 * 1024 }));
        socket.write(Buffer.alloc(512 * 1024), () => {
          socket.destroy();
          resolve('aborted');
        });
      });
      socket.on('error', () => resolve('closed'));
    }),
};

function idle(port: number, host: string, holdMs: number): Promise<HostileOutcome> {
  return new Promise((resolve) => {
    const socket = connectTcp(port, host);
    const timer = setTimeout(() => {
      socket.destroy();
      resolve('held');
    }, holdMs);
    const closed = () => {
      clearTimeout(timer);
      resolve('closed');
    };
    socket.on('error', closed);
    socket.on('close', closed);
    // Reading, so the server's FIN is seen (a paused socket never hears it).
    socket.resume();
  });
}
