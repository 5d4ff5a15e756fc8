import { describe, expect, it } from 'vitest';
import { eventually } from '../test/harness.ts';
import { createLogger } from './log.ts';
import { Readiness } from './readiness.ts';
import { Supervisor } from './supervisor.ts';

const log = createLogger('silent');

describe('Supervisor', () => {
  it('restarts a loop that throws or ends by itself, counts it, and shows it in its status', async () => {
    const restarts: string[] = [];
    const supervisor = new Supervisor({ log, minBackoffMs: 10, maxBackoffMs: 50, onRestart: (name) => restarts.push(name) });
    let runs = 0;
    supervisor.run('flaky', async ({ signal }) => {
      runs++;
      if (runs === 1) throw new Error('watch iterator failed');
      if (runs === 2) return; // ended without being asked to
      await new Promise((resolve) => signal.addEventListener('abort', resolve));
    });
    await eventually(() => runs >= 3);
    expect(restarts).toEqual(['flaky', 'flaky']);
    await eventually(() => supervisor.status('flaky').ok);
    expect(supervisor.status('flaky')).toMatchObject({ ok: true, figures: { restarts: 2 } });
    expect(supervisor.status('flaky').detail).toContain('ended by itself');
    await supervisor.stop();
    expect(supervisor.status('flaky').ok).toBe(false);
  });

  it('is not ok while a failed loop waits to restart, and stop() ends the wait', async () => {
    const supervisor = new Supervisor({ log, minBackoffMs: 60_000, maxBackoffMs: 60_000 });
    supervisor.run('down', async () => {
      throw new Error('storage unreachable');
    });
    await eventually(() => !supervisor.status('down').ok);
    expect(supervisor.status('down').detail).toBe('restarting after: storage unreachable');
    const stopped = Date.now();
    await supervisor.stop();
    expect(Date.now() - stopped).toBeLessThan(10_000);
  });

  it('shows what a running loop reports about itself', async () => {
    const supervisor = new Supervisor({ log });
    supervisor.run('watch', async ({ signal, report }) => {
      report({ ok: false, detail: 'reconnecting' });
      await new Promise((resolve) => signal.addEventListener('abort', resolve));
    });
    await eventually(() => supervisor.status('watch').detail === 'reconnecting');
    expect(supervisor.status('watch').ok).toBe(false);
    await supervisor.stop();
  });

  it('ends one loop and forgets it, the others running on; its name may be run again', async () => {
    const supervisor = new Supervisor({ log });
    const ended: string[] = [];
    const loop = (name: string) => async ({ signal }: { signal: AbortSignal }) => {
      await new Promise((resolve) => signal.addEventListener('abort', resolve));
      ended.push(name);
    };
    supervisor.run('a', loop('a'));
    supervisor.run('b', loop('b'));
    await supervisor.end('a');
    expect(ended).toEqual(['a']);
    expect(supervisor.names()).toEqual(['b']);
    expect(supervisor.status('b').ok).toBe(true);
    supervisor.run('a', loop('a again'));
    await supervisor.stop();
    expect(ended.sort()).toEqual(['a', 'a again', 'b']);
  });
});

describe('Readiness', () => {
  it('is ready only when every probe is ok; a probe that throws or hangs is not ok', async () => {
    const readiness = new Readiness();
    readiness.register('storage', () => ({ ok: true }));
    expect(await readiness.report()).toEqual({ ready: true, components: { storage: { ok: true } } });
    readiness.register('bus', async () => {
      throw new Error('NATS is disconnected');
    });
    readiness.register('pool', () => new Promise(() => {}));
    const report = await readiness.report();
    expect(report.ready).toBe(false);
    expect(report.components.bus).toEqual({ ok: false, detail: 'NATS is disconnected' });
    expect(report.components.pool!.detail).toContain('did not answer');
  });
});
