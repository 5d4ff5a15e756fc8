/**
 * What the `sluice` commands run once their command line is parsed: the server roles and the
 * admin operations. bin/cli.ts imports this module only then, so `sluice --help` or a usage
 * mistake loads none of it (configuration, chDB, NATS, storage, the relay). An admin command
 * that finds a running server talks to its control socket and loads none of those either
 * (the component graph is imported only where a command builds its own parts): about half a
 * second less per command.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { loadConfig, type SluiceConfig } from '../core/config.ts';
import { memorySummary } from '../core/memory-budget.ts';
import { createLogger, type Logger } from '../core/log.ts';
import type { Admin } from './admin.ts';
import type { Role, RunningSluice } from './app.ts';
import { controlSocketAlive, controlSocketPath, remoteAdmin } from './control.ts';
import { sendDemo } from './demo.ts';
import { EXIT_FAILED, EXIT_FLUSH_DEADLINE_MS, EXIT_STOPPED, EXIT_UNCAUGHT_EXCEPTION } from './exit-codes.ts';
import { firstRunNotice, humanLogStream, reachableHost, servingSummary } from './terminal.ts';

/** The work behind the commands (a fake in the parser's tests). */
export interface CliRuntime {
  /** Runs a server role until SIGINT or SIGTERM. */
  serve(role: Role): Promise<void>;
  /** Runs fn against the admin operations and prints what it returns. */
  admin(fn: (admin: Admin) => Promise<unknown>): Promise<void>;
  /** Creates or upgrades the storage schema and prints the report. */
  migrate(): Promise<void>;
  /** Sends the demo sample to a running Sluice and prints what was sent. */
  demo(options: DemoCommand): Promise<void>;
  /** Serves the relay's example form page on 127.0.0.1 until SIGINT or SIGTERM. */
  examplePage(options: ExamplePageCommand): Promise<void>;
  /** Prints the cluster a span rate needs, from a bench report (bin/capacity.ts). */
  capacity(options: CapacityCommand): Promise<void>;
}

export interface CapacityCommand {
  spansPerSecond: number;
  utilisation?: number;
  /** A bench report (.json); default: the newest in bench/results, else the repository's in bench/reference. */
  report?: string;
}

export interface ExamplePageCommand {
  siteKey: string;
  formKey: string;
  /** On 127.0.0.1; 0 picks a free one. */
  port: number;
  /** Where the browser reaches the relay; default from the config. */
  relayUrl?: string;
}

export interface DemoCommand {
  /** A source's API key; without one, a source named `demo` is created. */
  key?: string;
  /** The ingest port's base URL; default: this config's host and OTLP/HTTP port. */
  url?: string;
  minutes: number;
  requests: number;
}

/**
 * What Sluice writes holds secrets (relay-master.key, key hashes, the pid file, the control
 * socket, chDB's parts and insert files): none of it is for other users, whatever the shell's umask.
 */
const PRIVATE_FILES_UMASK = 0o077;

/** Output for machines (JSON, JSONEachRow) goes to stdout; logs and errors go to stderr. */
function print(value: unknown): void {
  process.stdout.write(typeof value === 'string' ? value : JSON.stringify(value, null, 2) + '\n');
}

/** The configuration from the environment, read when a command runs (never for `--help`). */
function configure(): Readonly<SluiceConfig> {
  process.umask(PRIVATE_FILES_UMASK);
  return loadConfig();
}

export const runtime: CliRuntime = {
  serve: (role) => runRole(role, configure()),
  admin: async (fn) => print(await withAdmin(configure(), fn)),
  migrate: async () => print(await migrateStorage(configure())),
  demo: async (options) => print(await runDemo(configure(), options)),
  examplePage: (options) => serveExamplePage(configure(), options),
  capacity: async ({ report, ...options }) => {
    const { capacityPlan, costsOf, formatPlan, newestReport } = await import('./capacity.ts');
    // Your own machine's newest run, else the one the repository keeps (docs/guides/capacity.md).
    const found = report
      ? { path: report, report: JSON.parse(await readFile(report, 'utf8')) }
      : newestReport(fileURLToPath(new URL('../bench/results/', import.meta.url))) ?? newestReport(fileURLToPath(new URL('../bench/reference/', import.meta.url)));
    if (!found) throw new Error('no bench report with cluster rows in bench/results or bench/reference: run `npm run bench -- --targets cluster-gateway,cluster-consumer` first, or give --report');
    const costs = costsOf(found.report);
    print(`${formatPlan(costs, options, capacityPlan(costs, options))}\n(from ${found.path})\n`);
  },
};

/**
 * `sluice relay example-page`: the form snippet filled in for a site, served on loopback so a
 * browser on this machine can post it from an origin the site allows. Runs until a signal.
 */
async function serveExamplePage(config: Readonly<SluiceConfig>, options: ExamplePageCommand): Promise<void> {
  const [{ createServer }, { examplePageHtml }] = await Promise.all([import('node:http'), import('../relay/example-page.ts')]);
  const relayUrl = (options.relayUrl ?? (config.relay.publicUrl || `http://${reachableHost(config.host)}:${config.relay.port}`)).replace(/\/+$/, '');
  let html = '';
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if ((request.method === 'GET' || request.method === 'HEAD') && (path === '/' || path === '/index.html')) {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      response.end(request.method === 'HEAD' ? undefined : html);
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
    response.end('Not found: the example page is at /\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as { port: number };
  const origin = `http://127.0.0.1:${port}`;
  html = examplePageHtml({ relayUrl, siteKey: options.siteKey, formKey: options.formKey, origin });
  process.stdout.write(`Example page for site key ${options.siteKey}, form ${options.formKey}: ${origin}/\n`
    + `It posts to the relay at ${relayUrl}; the site must allow the origin ${origin}. Ctrl-C stops it.\n`);
  await new Promise<void>((resolve) => {
    const stop = () => server.close(() => resolve());
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}

async function runDemo(config: Readonly<SluiceConfig>, { key, url, minutes, requests }: DemoCommand): Promise<unknown> {
  const created = key ? undefined : ((await withAdmin(config, (admin) => admin.createSource('demo'))) as { id: string; name: string; apiKey: string });
  const apiKey = key ?? created!.apiKey;
  const base = url ?? `http://${reachableHost(config.host)}:${config.http.port}`;
  const sent = await sendDemo({ url: base, apiKey, minutes, requests });
  return { url: base, ...(created ? { source: { id: created.id, name: created.name, apiKey } } : {}), sent };
}

/**
 * Runs fn against the running server's control socket, or builds the parts it needs itself
 * from the same component graph the server uses: the data dir (embedded), or NATS KV and the
 * configured storage (cluster).
 */
async function withAdmin<T>(config: Readonly<SluiceConfig>, fn: (admin: Admin) => Promise<T>): Promise<T> {
  const socket = controlSocketPath(config.dataDir);
  if (await controlSocketAlive(socket)) return fn(remoteAdmin(socket));
  const [{ SluiceGraph }, { publicUrl }] = await Promise.all([import('./graph.ts'), import('./components.ts')]);
  const graph = new SluiceGraph(config, createLogger('warn', 'stderr'));
  try {
    // chDB and the local state store live in the data dir, which one process owns at a time.
    if (!config.nats.url || !config.clickhouse.url) await graph.lockDataDir();
    // `sluice migrate` is the one place a server's schema is created: no migration on open.
    return await fn(await graph.admin(publicUrl(config), () => graph.storage(false)));
  } finally {
    await graph.shutdown();
  }
}

/**
 * `sluice migrate` opens the storage and nothing else: in a cluster it must not wait for NATS
 * (a JetStream cluster starting beside it may have no leader yet, and the schema does not need
 * one). On the data dir it behaves like every admin command: through the running server's
 * control socket, or with the data dir locked while chDB is open.
 */
async function migrateStorage(config: Readonly<SluiceConfig>): Promise<unknown> {
  const socket = controlSocketPath(config.dataDir);
  if (await controlSocketAlive(socket)) return remoteAdmin(socket).migrate();
  const [{ SluiceGraph }, { schemaOptions }, { migrate }] = await Promise.all([import('./graph.ts'), import('./components.ts'), import('../storage/migrate.ts')]);
  const graph = new SluiceGraph(config, createLogger('warn', 'stderr'));
  try {
    if (!config.clickhouse.url) await graph.lockDataDir();
    return await migrate(await graph.storage(false), config.storage.database, schemaOptions(config));
  } finally {
    await graph.shutdown();
  }
}

/** Past the shutdown deadline, the time steps get to notice it before the process exits anyway. */
const SHUTDOWN_EXIT_MARGIN_MS = 1000;

async function runRole(role: Role, config: Readonly<SluiceConfig>): Promise<void> {
  // A person at a terminal gets short text lines and a summary; anything else one JSON object a line.
  const terminal = process.stdout.isTTY === true;
  const log = createLogger(config.logLevel, terminal ? humanLogStream() : 'stdout');
  let app: RunningSluice | undefined;
  // A rejection nobody handled is a bug: logged with its cause and counted, never a silent
  // exit of a gateway that is otherwise serving. An exception nobody caught leaves the
  // process in an unknown state: logged, then the process exits for its supervisor to restart.
  process.on('unhandledRejection', (reason) => {
    log.error({ err: reason }, 'unhandled promise rejection (a bug); the process keeps serving');
    app?.metrics.unhandledRejections.inc();
  });
  const exit = (code: number) => exitAfterFlush(log, code);
  process.on('uncaughtException', (err) => {
    log.fatal({ err, exitCode: EXIT_UNCAUGHT_EXCEPTION }, 'uncaught exception (a bug); exiting');
    exit(EXIT_UNCAUGHT_EXCEPTION);
  });
  const { startSluice } = await import('./app.ts');
  app = await startSluice(role, config, log);
  const firstRunLink = app.console?.firstRunLink;
  if (terminal) {
    const cluster = role !== 'serve' || config.nats.url !== '';
    const hasSources = (await app.sources.listSources()).length > 0;
    const transcoder = app.transcoder && { setting: config.pipeline.transcoder, ...app.transcoder };
    process.stdout.write(servingSummary({ role, host: config.host, httpPort: app.httpPort, grpcPort: app.grpcPort, relayPort: app.relay?.port ?? 0, queryPort: app.queryPort, consoleUrl: app.console?.url ?? '', firstRunLink, dataDir: config.dataDir, cluster, hasSources, transcoder, deliveryInbox: config.delivery.inbox, memory: memorySummary(app.memory)  }));
  } else if (firstRunLink) {
    process.stderr.write(firstRunNotice(firstRunLink));
  }
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      log.warn({ signal, step: app!.stopping() }, 'second signal: exiting without finishing the shutdown');
      return exit(EXIT_FAILED);
    }
    stopping = true;
    log.info({ signal, timeoutMs: config.shutdownTimeoutMs }, 'shutting down');
    const deadline = Date.now() + config.shutdownTimeoutMs;
    // Whatever a step waits for (a client holding a stream, a storage insert), the process goes
    // at the deadline: a restart must not find the data dir held by a process that is stopping.
    // (Nothing acknowledged is lost: the local log or JetStream holds it for the next start;
    // the data-dir lock of a process that is gone is taken over.)
    setTimeout(() => {
      log.error({ step: app!.stopping(), timeoutMs: config.shutdownTimeoutMs }, 'shutdown did not finish in time: exiting');
      exit(EXIT_FAILED);
    }, config.shutdownTimeoutMs + SHUTDOWN_EXIT_MARGIN_MS).unref();
    await app!.shutdown(deadline);
    exit(EXIT_STOPPED);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

/** Exits with `code` once the log reached its stream, or after EXIT_FLUSH_DEADLINE_MS if it does not. */
function exitAfterFlush(log: Logger, code: number): void {
  // Not unref'd: it holds the process until one of the two exits it, whatever else is left.
  setTimeout(() => process.exit(code), EXIT_FLUSH_DEADLINE_MS);
  log.flush(() => process.exit(code));
}
