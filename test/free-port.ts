/**
 * A loopback port for a server a test starts, free when asked. Not the kernel's pick (`listen(0)`):
 * that comes from the ephemeral range, which every outgoing connection and every `listen(0)` of
 * the test files running beside this one draw from too, so the port could be taken by the time
 * the server binds it (clickhouse-server once failed to start on "Address already in use"). A
 * random port below that range (`/proc/sys/net/ipv4/ip_local_port_range`) is taken only by a
 * server that binds it by number, and is checked free by binding it here first.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const LOWEST = 10_000;

function ephemeralStart(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32_768;
  } catch {
    return 32_768; // Linux's default
  }
}

function tryPort(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const probe = createServer()
      .once('error', () => resolve(undefined))
      .listen(port, '127.0.0.1', () => {
        const { port: bound } = probe.address() as { port: number };
        probe.close(() => resolve(bound));
      });
  });
}

export async function freePort(): Promise<number> {
  const below = ephemeralStart();
  for (let tries = 0; below - LOWEST > 1000 && tries < 50; tries++) {
    const port = await tryPort(LOWEST + Math.floor(Math.random() * (below - LOWEST)));
    if (port !== undefined) return port;
  }
  const port = await tryPort(0); // a narrowed ephemeral range: the kernel's pick after all
  if (port === undefined) throw new Error('no free loopback port');
  return port;
}
