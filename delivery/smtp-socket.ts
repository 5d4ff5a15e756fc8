/**
 * The sockets of a tenant's SMTP transport. nodemailer's pool asks for one per connection (its
 * `getSocket` option); the egress policy checks the SMTP URL then, and the socket goes to the
 * address it approved, so no second lookup can swap in another. nodemailer speaks SMTP over it
 * and upgrades it to TLS itself (smtps:, or STARTTLS), verifying the certificate against `host`:
 * the URL's host name, which this answers along with the socket.
 */
import type net from 'node:net';
import type { SMTPPoolOptions } from 'nodemailer';
import type { ConnectOptions, EgressPolicy } from './egress.ts';
import { EgressRefusedError } from './smtp-outcome.ts';

/** How a tenant transport opens its connections. */
export interface CheckedSocketOptions {
  egress: EgressPolicy;
  connect: (options: ConnectOptions) => net.Socket;
  /** The tenant's SMTP URL, checked before every connection. */
  url: string;
  port: number;
  /** Connecting may take this long from when the pool asked (the lookup included). */
  connectionTimeoutMs: number;
}

type GetSocket = NonNullable<SMTPPoolOptions['getSocket']>;

/** A `getSocket` for nodemailer's pool: a plain TCP socket to the checked address, or the refusal. */
export function checkedSocket({ egress, connect, url, port, connectionTimeoutMs }: CheckedSocketOptions): GetSocket {
  return (options, callback) => {
    // The pool says when it asked: connecting and the greeting share one connection timeout.
    const { connectStartedAt } = options as { connectStartedAt?: number };
    const startedAt = connectStartedAt ?? Date.now();
    egress.check(url, 'smtp').then((verdict) => {
      if (!verdict.ok) return callback(new EgressRefusedError(verdict));
      let socket: net.Socket;
      try {
        socket = connect({ host: verdict.address, port, tls: false });
      } catch (err) {
        return callback(err as Error);
      }
      whenConnected(socket, startedAt + connectionTimeoutMs - Date.now(), (err) => {
        if (err) return callback(err);
        callback(null, { connection: socket, host: verdict.host });
      });
    }, (err: Error) => callback(err));
  };
}

/** Calls back once `socket` is connected, or with its error, or ETIMEDOUT after `withinMs` (the socket destroyed). */
function whenConnected(socket: net.Socket, withinMs: number, done: (err?: Error) => void): void {
  if (!socket.connecting && !socket.destroyed) return done();
  const settle = (err?: Error) => {
    clearTimeout(timer);
    socket.off('connect', onConnect).off('error', settle);
    if (err) socket.destroy();
    done(err);
  };
  const onConnect = () => settle();
  const timer = setTimeout(() => settle(Object.assign(new Error('connection timeout'), { code: 'ETIMEDOUT', timeoutType: 'CONNECT_TIMEOUT' })), Math.max(withinMs, 1));
  socket.once('connect', onConnect).once('error', settle);
}
