/**
 * Which engine serves. uWebSockets.js's package hands out a JavaScript emulation where it has
 * no binary (Node 22, 24): Sluice must notice and use its own node:http adapter instead.
 */
import { createRequire } from 'node:module';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../core/log.ts';
import type { HttpHandler, HttpServer, HttpServerOptions } from './adapter.ts';
import { createHttpServer } from './index.ts';
import { probeNativeUws, type UwsTarget } from './uws.ts';

const HERE: UwsTarget = { platform: process.platform, arch: process.arch, modules: process.versions.modules, node: process.versions.node };
/** Node 24's ABI: the package has no binary for it and would answer with its emulation. */
const NODE_24: UwsTarget = { ...HERE, modules: '137', node: '24.21.0' };
/** Node 20's ABI: the package has its binary, whatever Node runs this test. */
const NODE_20: UwsTarget = { ...HERE, modules: '115', node: '20.20.2' };
/** The suite runs on Node 20, where the binary loads, and on Node 24, where it does not. */
const native = probeNativeUws().uws !== undefined;

const OPTIONS: HttpServerOptions = { maxBodyBytes: 1024, bodyDeadline: { timeoutMs: 10_000, minBytesPerSecond: 65_536 }, maxConnections: 100 };
const handler: HttpHandler = async (request) => ({ status: 200, body: `hello ${request.path}` });

function capturedLog() {
  const lines: Array<Record<string, unknown>> = [];
  return { log: createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) }), lines };
}

const servers: HttpServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close(0);
});

describe('probeNativeUws', () => {
  it.runIf(native)('finds the native engine on this machine (Node 20), the same module the package hands out here', () => {
    const probe = probeNativeUws();
    expect(probe.reason).toBeUndefined();
    expect(typeof probe.uws?.App).toBe('function');
    expect(probe.uws).toBe(createRequire(import.meta.url)('uWebSockets.js'));
  });

  it('says why not where the package has no binary, without loading its emulation', () => {
    const loaded: string[] = [];
    const probe = probeNativeUws(NODE_24, (path) => loaded.push(path));
    expect(probe.uws).toBeUndefined();
    expect(probe.reason).toBe(`uWebSockets.js has no binary for Node 24.21.0 (ABI 137) on ${HERE.platform}-${HERE.arch}`);
    expect(loaded).toEqual([]);
  });

  it('says why not when the binary is there but does not load', () => {
    const probe = probeNativeUws(NODE_20, () => {
      throw new Error("/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found");
    });
    expect(probe.reason).toMatch(/^uWebSockets\.js's binary for Node .* does not load here: .*GLIBC_2\.38/);
  });
});

describe('createHttpServer', () => {
  it.runIf(native)('serves with uWebSockets.js where its native engine runs, without a warning', async () => {
    const { log, lines } = capturedLog();
    const server = createHttpServer('uws', handler, OPTIONS, log);
    servers.push(server);
    expect(server.engine).toBe('uws');
    const port = await server.listen('127.0.0.1', 0);
    expect(await (await fetch(`http://127.0.0.1:${port}/x`)).text()).toBe('hello /x');
    expect(lines).toEqual([]);
  });

  it('falls back to node:http where only the emulation exists, and says so once per process', async () => {
    const { log, lines } = capturedLog();
    const probe = probeNativeUws(NODE_24);
    const ingest = createHttpServer('uws', handler, OPTIONS, log, probe);
    const relay = createHttpServer('uws', handler, OPTIONS, log, probe);
    servers.push(ingest, relay);
    expect([ingest.engine, relay.engine]).toEqual(['node', 'node']);
    const port = await ingest.listen('127.0.0.1', 0);
    expect(await (await fetch(`http://127.0.0.1:${port}/y`)).text()).toBe('hello /y');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, reason: probe.reason, msg: expect.stringContaining('serving HTTP with node:http') });
  });

  it('does not warn when node:http is what was configured', () => {
    const { log, lines } = capturedLog();
    const server = createHttpServer('node', handler, OPTIONS, log, probeNativeUws(NODE_24));
    expect(server.engine).toBe('node');
    expect(lines).toEqual([]);
  });
});
