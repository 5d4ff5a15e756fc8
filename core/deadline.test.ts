import { once } from 'node:events';
import { connect } from 'node:net';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { withinDeadline } from './deadline.ts';

const never = new Promise<never>(() => {});
const late = () => 'late' as const;

function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe('withinDeadline', () => {
  it('gives the answer, its rejection, or late() (a value or a throw) when nothing came', async () => {
    expect(await withinDeadline(Promise.resolve(1), 50, late)).toBe(1);
    await expect(withinDeadline(Promise.reject(new Error('refused')), 50, late)).rejects.toThrow('refused');
    expect(await withinDeadline(never, 20, late)).toBe('late');
    await expect(withinDeadline(never, 20, () => { throw new Error('no answer'); })).rejects.toThrow('no answer');
  });

  it('does not blame the other side for its own stall: an answer waiting in a socket wins', async () => {
    // The echo server runs on a thread of its own, so its answer really arrives during the stall
    // (on this thread it would wait for the stall too, and then race the timer on a loaded machine).
    const echo = new Worker(`
      const { createServer } = require('node:net');
      const { parentPort } = require('node:worker_threads');
      const server = createServer((socket) => socket.on('data', (data) => socket.write(data)));
      server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));
    `, { eval: true });
    const [port] = (await once(echo, 'message')) as [number];
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    try {
      const echoed = once(socket, 'data').then(([data]) => String(data));
      const answer = withinDeadline(echoed, 50, late);
      socket.write('pong');
      stall(300); // the echo arrives during the stall and is read only after it
      expect(await answer).toBe('pong');
    } finally {
      socket.destroy();
      await echo.terminate();
    }
  });

  it('gives up after ten deadlines of wall time however often the loop stalls', async () => {
    const stalls = setInterval(() => stall(40), 1);
    try {
      // Every timer fires late; without the bound this would wait for ever (the test's timeout).
      expect(await withinDeadline(never, 20, late)).toBe('late');
    } finally {
      clearInterval(stalls);
    }
  });
});
