/**
 * A redis-server of a test file's own, on a free port, that the test may stop and restart
 * without touching the machine's shared one; and the clients it hands out, set up as the
 * gateway sets up its limiter client (commands fail at once while disconnected).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createClient } from 'redis';
import { freePort } from './free-port.ts';

/** A client set up as the gateway sets up its limiter client. */
function limiterClient(url: string) {
  return createClient({
    url,
    // Fail commands at once while disconnected (the limiter falls back), reconnect in the background.
    disableOfflineQueue: true,
    socket: { connectTimeout: 500, reconnectStrategy: () => 100 },
  });
}

export type TestRedisClient = ReturnType<typeof limiterClient>;

export class TestRedisServer {
  private port = 0;
  private server: ChildProcess | undefined;
  private readonly clients: TestRedisClient[] = [];

  /** Starts redis-server (on the same port after a stop) and waits until it answers. */
  async start(): Promise<void> {
    this.port ||= await freePort();
    this.server = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    this.server.once('error', (err) => {
      throw new Error(`redis-server could not start (run deploy/services.sh to install it): ${err.message}`);
    });
    const deadline = Date.now() + 5000;
    for (;;) {
      const probe = createClient({ url: this.url, socket: { reconnectStrategy: false } });
      probe.on('error', () => {});
      try {
        await probe.connect();
        await probe.ping();
        await probe.quit();
        return;
      } catch {
        if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${this.port}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  }

  async stop(): Promise<void> {
    const running = this.server;
    this.server = undefined;
    if (!running || running.exitCode !== null) return;
    await new Promise((resolve) => {
      running.once('exit', resolve);
      running.kill('SIGKILL');
    });
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async client(): Promise<TestRedisClient> {
    const redis = limiterClient(this.url);
    redis.on('error', () => {});
    await redis.connect();
    this.clients.push(redis);
    return redis;
  }

  /** Closes every client handed out, then the server. */
  async close(): Promise<void> {
    for (const redis of this.clients.splice(0)) redis.destroy();
    await this.stop();
  }
}
