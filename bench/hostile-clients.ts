/**
 * Clients that misbehave, one attempt each, for the soak run (bench/soak.ts): each holds or
 * abuses a connection the way an attacker or a broken exporter does, for at most `holdMs`, and
 * says how the server answered. None needs anything but the target's ports and a valid key.
 */
import { randomBytes } from 'node:crypto';
import { connect as connectTcp, type Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { h2Connect, partialCall, silentConnection } from '../test/grpc-raw.ts';

export interface HostileTarget {
  host: string;
  httpPort: number;
  grpcPort: number;
  apiKey: string;
}

/** How one attempt ended: `answered:<status>` (HTTP status or grpc-status), `closed` (by the server), `held` (still open at holdMs). */
export type HostileOutcome = string;

export type HostileKind = (target: HostileTarget, holdMs: number) => Promise<HostileOutcome>;

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

/** `outcome`, or `held` once `holdMs` passed; `release` ends the client's connection either way. */
async function atMost(outcome: Promise<HostileOutcome>, holdMs: number, release: () => void): Promise<HostileOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const held = new Promise<HostileOutcome>((resolve) => (timer = setTimeout(() => resolve('held'), holdMs)));
  try {
    return await Promise.race([outcome, held]);
  } finally {
    clearTimeout(timer);
    release();
  }
}

/** A gRPC Export on its own connection announcing a ~10 MiB message, 64 KiB of it sent, then nothing. */
function grpcStall(target: HostileTarget, holdMs: number, apiKey?: string): Promise<HostileOutcome> {
  const session = h2Connect(`${target.host}:${target.grpcPort}`);
  const call = partialCall(session, { apiKey, declared: 10 * 1024 * 1024 - 16, send: 64 * 1024 });
  return atMost(call.then(({ status }) => (status === undefined ? 'closed' : `answered:grpc-${status}`)), holdMs, () => session.destroy());
}

/** A TCP connection that never says anything. */
function idle(port: number, holdMs: number): Promise<HostileOutcome> {
  const connection = silentConnection(port);
  return atMost(connection.closed.then(() => 'closed'), holdMs, () => connection.socket.destroy());
}

export const HOSTILE_KINDS: Record<string, HostileKind> = {
  /** A valid key, 2 MiB announced, 100 bytes every half second. */
  slowBody: (target, holdMs) =>
    rawHttp(target, holdMs, post(target, '/v1/traces', { 'content-type': 'application/x-protobuf', 'content-length': 2 * 1024 * 1024 }), (socket) => {
      const drip = setInterval(() => socket.write(Buffer.alloc(100)), 500);
      return () => clearInterval(drip);
    }),
  /** No key: a gRPC message announced at ~10 MiB, 64 KiB of it sent, then nothing. */
  grpcStallWithoutKey: (target, holdMs) => grpcStall(target, holdMs),
  /** A valid key: the same stall. */
  grpcStallWithKey: (target, holdMs) => grpcStall(target, holdMs, target.apiKey),
  /** A TCP connection to the gRPC port that never says anything. */
  idleGrpc: (target, holdMs) => idle(target.grpcPort, holdMs),
  /** A TCP connection to the HTTP port that never says anything. */
  idleHttp: (target, holdMs) => idle(target.httpPort, holdMs),
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
