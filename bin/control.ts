/**
 * The control socket: a Unix socket in the data dir (created private, mode 0600) on which `sluice serve`
 * answers the CLI's admin calls, so `sluice sources ...` and `sluice query` work while the
 * server owns the data dir. Only users who can open the data dir can reach it.
 */
import { createServer, request, type Server } from 'node:http';
import { chmod, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ADMIN_METHODS, type Admin } from './admin.ts';

export function controlSocketPath(dataDir: string): string {
  return join(dataDir, 'sluice.sock');
}

const MAX_CONTROL_BODY = 1024 * 1024;

function isAdminMethod(name: string): name is (typeof ADMIN_METHODS)[number] {
  return (ADMIN_METHODS as readonly string[]).includes(name);
}

export class ControlServer {
  private server: Server | undefined;

  constructor(private readonly dataDir: string, private readonly admin: Admin) {}

  async start(): Promise<void> {
    const path = controlSocketPath(this.dataDir);
    await rm(path, { force: true });
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_CONTROL_BODY) req.destroy();
        else chunks.push(chunk);
      });
      req.on('end', async () => {
        try {
          const { method, args } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { method: string; args: unknown };
          if (!isAdminMethod(method)) throw new Error(`unknown admin method ${method}`);
          const call = this.admin[method] as (...values: unknown[]) => Promise<unknown>;
          const result = await call.apply(this.admin, Array.isArray(args) ? args : []);
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ result }));
        } catch (err) {
          res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: (err as Error).message }));
        }
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      // The socket file is created inside listen(), synchronously (bind(2) on a pipe path): under
      // this umask it is born private, with no moment in which another user could connect. 077,
      // not 177: the umask is process-wide, and a directory another thread (chDB) makes in this
      // instant must stay usable by its owner.
      const umask = process.umask(0o077);
      try {
        server.listen(path, () => resolve());
      } finally {
        process.umask(umask);
      }
    });
    await chmod(path, 0o600); // the documented mode (the execute bit means nothing on a socket)
    this.server = server;
  }

  async shutdown(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
  }
}

/** The CLI's side: an Admin whose every call goes over the control socket. */
export function remoteAdmin(socketPath: string): Admin {
  const call = (method: string, ...args: unknown[]) =>
    new Promise<any>((resolve, reject) => {
      const req = request({ socketPath, path: '/', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          try {
            const reply = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            if (reply.error !== undefined) reject(new Error(reply.error));
            else resolve(reply.result);
          } catch (err) {
            reject(err);
          }
        });
      });
      req.on('error', reject);
      req.end(JSON.stringify({ method, args }));
    });
  return Object.fromEntries(ADMIN_METHODS.map((method) => [method, (...args: unknown[]) => call(method, ...args)])) as unknown as Admin;
}

/** True if a server answers on the socket (a stale socket file from a crash does not). */
export function controlSocketAlive(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath, path: '/', method: 'POST' }, (res) => {
      res.resume();
      resolve(true);
    });
    req.on('error', () => resolve(false));
    req.end('{}');
  });
}
