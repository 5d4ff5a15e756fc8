import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from './free-port.ts';

describe('freePort', () => {
  it('gives bindable loopback ports outside the range outgoing connections draw from', async () => {
    const ephemeralStart = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    for (const port of ports) expect(port).toBeLessThan(ephemeralStart);
    const port = ports[0]!;
    const server = createServer();
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
    // One that is taken is not given.
    const others = await Promise.all(Array.from({ length: 200 }, () => freePort()));
    expect(others).not.toContain(port);
    await new Promise((resolve) => server.close(resolve));
  });
});
