/**
 * A safety net for tests of senders that a tenant can aim: while the calling file runs, a socket
 * may connect to loopback only. A sender that ignored its connector or its egress policy fails
 * the test instead of reaching another host.
 */
import net from 'node:net';
import { afterAll, beforeAll } from 'vitest';

/** Installs the guard for the calling test file (beforeAll), and removes it after (afterAll). */
export function allowLoopbackConnectionsOnly(): void {
  const realConnect = net.Socket.prototype.connect;
  beforeAll(() => {
    net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
      // net.connect passes its normalised [options, callback]; a direct call passes (options | port, host?).
      const first = Array.isArray(args[0]) ? args[0][0] : args[0];
      const options = (typeof first === 'object' && first !== null ? first : { port: first, host: args[1] }) as net.TcpSocketConnectOpts & { path?: string };
      const host = options.host ?? 'localhost';
      if (options.path === undefined && !/^(127\.\d+\.\d+\.\d+|::1|localhost)$/.test(host)) {
        throw new Error(`test guard: a connection to ${host} was attempted`);
      }
      return realConnect.apply(this, args as Parameters<typeof realConnect>);
    } as typeof realConnect;
  });
  afterAll(() => {
    net.Socket.prototype.connect = realConnect;
  });
}
