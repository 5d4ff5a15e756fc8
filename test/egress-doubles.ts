/**
 * Stand-ins for the network in tests of the egress policy and of the senders it guards: a
 * resolver answering from a table, and a connector that records where it was asked to connect
 * and connects nowhere. No lookup and no connection leaves the process.
 */
import { isIP, type Socket } from 'node:net';
import type { ConnectOptions, ResolvedAddress } from '../delivery/egress.ts';

/** A name's answer: addresses, an error, or addresses by how often the name was asked (1 first: DNS rebinding). */
type Answer = string[] | Error | ((call: number) => string[]);

/** A resolver answering from `answers` (ENOTFOUND for any other name), and the names it was asked. */
export function tableResolver(answers: Record<string, Answer>) {
  const lookups: string[] = [];
  const resolve = async (host: string): Promise<ResolvedAddress[]> => {
    lookups.push(host);
    const answer = answers[host];
    if (answer === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    if (answer instanceof Error) throw answer;
    const addresses = typeof answer === 'function' ? answer(lookups.filter((asked) => asked === host).length) : answer;
    return addresses.map((address) => ({ address, family: isIP(address) as 4 | 6 }));
  };
  return { resolve, lookups };
}

/** A connector that records each request and fails it as a refused connection would. */
export function refusingConnector() {
  const connections: ConnectOptions[] = [];
  const connect = (options: ConnectOptions): Socket => {
    connections.push(options);
    throw Object.assign(new Error('the test connector connects nowhere'), { code: 'ECONNREFUSED' });
  };
  return { connect, connections };
}
