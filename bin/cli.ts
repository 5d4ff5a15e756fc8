/**
 * The `sluice` command line. Output for machines (JSON, JSONEachRow) goes to stdout; logs and
 * errors go to stderr.
 */
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type SluiceConfig } from '../core/config.ts';
import { createLogger } from '../core/log.ts';
import { SourceRegistry } from '../gateway/sources.ts';
import type { Storage } from '../storage/storage.ts';
import { LocalAdmin, type Admin } from './admin.ts';
import { startSluice, type Role } from './app.ts';
import { connectNats, createStateStore, createStorage, schemaOptions } from './components.ts';
import { controlSocketAlive, controlSocketPath, remoteAdmin } from './control.ts';
import { lockDataDir } from './lock.ts';

const USAGE = `usage: sluice <command>

  serve                              run every role in one process (gateway, pipeline, storage)
  gateway                            cluster: HTTP/gRPC front end and worker pool (needs NATS_URL)
  consume                            cluster: storage consumer, JetStream → storage (needs NATS_URL)
  migrate                            create or upgrade the storage schema
  sources create --name NAME         create an ingestion source and its first API key
  sources list                       list sources and their keys (never the keys themselves)
  sources add-key --source ID        issue another API key for a source
  sources revoke-key --key KEY_ID    revoke a key (by its id, or the key itself)
  query "SQL"                        run a read-only SQL query, print JSONEachRow

Configuration comes from SLUICE_* environment variables (see README.md).`;

class UsageError extends Error {}

/**
 * Runs fn against the running server's control socket, or opens the state and storage itself:
 * the data dir (embedded), or NATS KV and the configured storage (cluster).
 */
async function withAdmin<T>(config: Readonly<SluiceConfig>, fn: (admin: Admin) => Promise<T>): Promise<T> {
  const socket = controlSocketPath(config.dataDir);
  if (await controlSocketAlive(socket)) return fn(remoteAdmin(socket));

  const cleanups: Array<() => Promise<unknown>> = [];
  const log = createLogger('warn', 'stderr');
  try {
    // chDB and the local state store live in the data dir, which one process owns at a time.
    if (!config.nats.url || !config.clickhouse.url) cleanups.push(await lockDataDir(config.dataDir));
    const nc = await connectNats(config, log);
    if (nc) cleanups.push(() => nc.close());
    const state = createStateStore(config, nc);
    await state.start();
    cleanups.push(() => state.shutdown());
    const sources = new SourceRegistry(state);
    await sources.start();
    let storage: Storage | undefined;
    const openStorage = async () => {
      if (!storage) {
        // `sluice migrate` is the one place a server's schema is created: no migration on open.
        const opened = createStorage(config, { migrateOnStart: false });
        await opened.start();
        cleanups.push(() => opened.shutdown());
        storage = opened;
      }
      return storage;
    };
    return await fn(new LocalAdmin(sources, openStorage, config.storage.database, schemaOptions(config)));
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
  }
}

function print(value: unknown): void {
  process.stdout.write(typeof value === 'string' ? value : JSON.stringify(value, null, 2) + '\n');
}

function option(args: string[], name: string): string {
  const { values } = parseArgs({ args, options: { [name]: { type: 'string' } }, strict: true });
  const value = values[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`missing --${name}`);
  return value;
}

async function runRole(role: Role, config: Readonly<SluiceConfig>): Promise<void> {
  const log = createLogger(config.logLevel);
  const app = await startSluice(role, config, log);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    await app.shutdown();
    log.flush();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

export async function main(argv: string[]): Promise<number> {
  const [command, sub, ...rest] = argv;
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    print(USAGE + '\n');
    return command ? 0 : 1;
  }
  const config = loadConfig();
  switch (command) {
    case 'serve':
    case 'gateway':
    case 'consume':
      await runRole(command, config);
      return -1; // keep running
    case 'migrate':
      print(await withAdmin(config, (admin) => admin.migrate()));
      return 0;
    case 'query':
      if (!sub) throw new UsageError('missing SQL');
      print(await withAdmin(config, (admin) => admin.query(sub)));
      return 0;
    case 'sources':
      switch (sub) {
        case 'create': {
          const name = option(rest, 'name');
          print(await withAdmin(config, (admin) => admin.createSource(name)));
          return 0;
        }
        case 'list':
          print(await withAdmin(config, (admin) => admin.listSources()));
          return 0;
        case 'add-key': {
          const source = option(rest, 'source');
          print(await withAdmin(config, (admin) => admin.addKey(source)));
          return 0;
        }
        case 'revoke-key': {
          const key = option(rest, 'key');
          print(await withAdmin(config, (admin) => admin.revokeKey(key)));
          return 0;
        }
      }
      throw new UsageError(`unknown sources command: ${sub ?? '(none)'}`);
  }
  throw new UsageError(`unknown command: ${command}`);
}

export async function run(argv: string[]): Promise<void> {
  try {
    const code = await main(argv);
    if (code >= 0) process.exitCode = code;
  } catch (err) {
    if (err instanceof ConfigError) process.stderr.write(`sluice: ${err.message}\n`);
    else if (err instanceof UsageError) process.stderr.write(`sluice: ${err.message}\n\n${USAGE}\n`);
    else process.stderr.write(`sluice: ${(err as Error).message}\n`);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  }
}
