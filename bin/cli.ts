/**
 * The `sluice` command line. Output for machines (JSON, JSONEachRow) goes to stdout; logs and
 * errors go to stderr.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { parseTimestamp } from '../pipeline/agent/time.ts';
import { ConfigError, loadConfig, type SluiceConfig } from '../core/config.ts';
import { createLogger } from '../core/log.ts';
import { OPERATOR_COMMANDS, type OperatorInput } from '../relay/operator.ts';
import type { Admin, DeployFilter } from './admin.ts';
import { startSluice, type Role, type RunningSluice } from './app.ts';
import { migrate } from '../storage/migrate.ts';
import { publicUrl, schemaOptions } from './components.ts';
import { SluiceGraph } from './graph.ts';
import { controlSocketAlive, controlSocketPath, remoteAdmin } from './control.ts';

const USAGE = `usage: sluice <command>

  serve                              run every role in one process (gateway, pipeline, storage)
  gateway                            cluster: HTTP/gRPC front end and worker pool (needs NATS_URL)
  consume                            cluster: storage consumer, JetStream → storage (needs NATS_URL)
  deliver                            cluster: relay delivery worker, delivery stream → email, WhatsApp,
                                     webhooks (needs NATS_URL and SLUICE_RELAY_MASTER_KEY)
  migrate                            create or upgrade the storage schema
  sources create --name NAME         create an ingestion source and its first API key
  sources list                       list sources and their keys (never the keys themselves)
  sources add-key --source ID        issue another API key for a source
  sources revoke-key --key KEY_ID    revoke a key (by its id, or the key itself)
  query "SQL"                        run a read-only SQL query, print JSONEachRow
  agent-config set --source ID --file F   push the JSON object in F to the source's agents
  agent-config get --source ID       show the config the source's agents get
  install-tokens create --source ID  issue a 24-hour install token; prints it and its URL
  deploys list [--source ID] [--service S] [--environment E] [--since T] [--until T] [--limit N]
                                     deployment markers, newest first (T: RFC 3339, epoch ns, or 30m/24h/7d ago;
                                     default: the last 7 days)
  agents list [--source ID]          the latest heartbeat of each agent
  relay onboard --tenant NAME --owner EMAIL     create a relay tenant and its owner (prints a one-time password)
  relay tenants list
  relay sites create --tenant ID --name N [--origin https://example.com ...]
  relay sites list --tenant ID
  relay sites update --site ID [--name N] [--origin O ... | --clear-origins] [--active true|false]
  relay captcha set --site ID --provider recaptcha_v2|recaptcha_v3|hcaptcha|turnstile --site-key K
                    [--secret-file F (- for stdin)] [--score-threshold 0.5]
  relay captcha clear-secret --site ID | relay captcha remove --site ID
  relay forms create --site ID --name N [--key FORM_KEY] | relay forms list --site ID
  relay forms update --site ID --form ID [--name N] [--active true|false] [--template ID|none]
  relay recipients add --site ID --form ID --channel email|whatsapp --address A [--active true|false]
  relay recipients update --site ID --form ID --recipient ID --active true|false
  relay recipients remove --site ID --form ID --recipient ID
  relay submissions list --site ID --form ID [--limit N] [--before CURSOR]   (newest first)
  relay webhooks add --site ID --form ID --url URL      (prints the signing secret once)
  relay jobs list --site ID --form ID [--state queued|sending|delivered|failed|dead] [--limit N]   (dead first)
  relay jobs show --tenant ID --job ID                  a delivery job and every attempt
  relay jobs retry --tenant ID --job ID                 retry a dead job (a fresh series of attempts)
  relay jobs retry-dead --site ID --form ID             retry every dead job of a form
  relay delivery show --tenant ID
  relay delivery set-email --tenant ID [--from ADDR] [--secret-file F (the SMTP URL with credentials; - for stdin)]
  relay delivery set-whatsapp --tenant ID --phone-number-id ID --secret-file F (the access token)
                              [--template NAME --language en_US]
  relay delivery clear --tenant ID --channel email|whatsapp   (back to the server's defaults)
  relay api-keys create --site ID --name N              (prints the key once)
  relay api-keys list --tenant ID | relay api-keys revoke --tenant ID --key KEY_ID
  relay users create --tenant ID --email E --role owner|admin|member | relay users list --tenant ID
  relay handover --tenant ID                            (a single-use claim token for the client)

Configuration comes from SLUICE_* environment variables (see README.md).`;

class UsageError extends Error {}

/**
 * Runs fn against the running server's control socket, or builds the parts it needs itself
 * from the same component graph the server uses: the data dir (embedded), or NATS KV and the
 * configured storage (cluster).
 */
async function withAdmin<T>(config: Readonly<SluiceConfig>, fn: (admin: Admin) => Promise<T>): Promise<T> {
  const socket = controlSocketPath(config.dataDir);
  if (await controlSocketAlive(socket)) return fn(remoteAdmin(socket));
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
  const graph = new SluiceGraph(config, createLogger('warn', 'stderr'));
  try {
    if (!config.clickhouse.url) await graph.lockDataDir();
    return await migrate(await graph.storage(false), config.storage.database, schemaOptions(config));
  } finally {
    await graph.shutdown();
  }
}

function print(value: unknown): void {
  process.stdout.write(typeof value === 'string' ? value : JSON.stringify(value, null, 2) + '\n');
}

/** The string options of a subcommand; `required` ones must be present and non-empty. */
function options<R extends string, O extends string>(args: string[], required: readonly R[], optional: readonly O[] = []): Record<R, string> & Partial<Record<O, string>> {
  let values: Record<string, unknown>;
  try {
    const spec = Object.fromEntries([...required, ...optional].map((name) => [name, { type: 'string' as const }]));
    values = parseArgs({ args, options: spec, strict: true }).values;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  for (const name of required) {
    if (typeof values[name] !== 'string' || values[name] === '') throw new UsageError(`missing --${name}`);
  }
  return values as Record<R, string> & Partial<Record<O, string>>;
}

function option(args: string[], name: string): string {
  return options(args, [name])[name];
}

const DURATION_UNITS: Record<string, number> = { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 };

/** A --since/--until value: RFC 3339, epoch nanoseconds, or a duration ago (30m, 24h, 7d). */
function timeOption(name: string, value: string | undefined, fallbackMs: number): string {
  if (value === undefined) return String(BigInt(fallbackMs) * 1_000_000n);
  const ago = /^(\d+)([smhd])$/.exec(value);
  if (ago) return String(BigInt(Date.now() - Number(ago[1]) * DURATION_UNITS[ago[2]!]!) * 1_000_000n);
  const nanos = parseTimestamp(value);
  if (nanos === undefined) throw new UsageError(`--${name}: not RFC 3339, epoch nanoseconds or a duration like 24h`);
  return String(nanos);
}

const RELAY_OPTIONS = [
  'tenant', 'owner', 'name', 'site', 'form', 'key', 'channel', 'address', 'url', 'provider', 'site-key', 'secret-file',
  'score-threshold', 'email', 'role', 'active', 'recipient', 'template', 'limit', 'before', 'state', 'job', 'from',
  'phone-number-id', 'language',
] as const;

/** The options of a `sluice relay` command; a secret is read from a file (or stdin), never from argv. */
async function relayOptions(args: string[]): Promise<OperatorInput> {
  let values: Record<string, string | string[] | boolean | undefined>;
  try {
    const spec = Object.fromEntries(RELAY_OPTIONS.map((name) => [name, { type: 'string' as const }]));
    values = parseArgs({ args, options: { ...spec, origin: { type: 'string', multiple: true }, 'clear-origins': { type: 'boolean' } }, strict: true }).values;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { 'secret-file': secretFile, ...input } = values;
  if (typeof secretFile === 'string') return { ...input, secret: (await readFile(secretFile === '-' ? '/dev/stdin' : secretFile, 'utf8')).trim() };
  return input;
}

async function readJsonFile(path: string): Promise<unknown> {
  const text = await readFile(path === '-' ? '/dev/stdin' : path, 'utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${path} is not JSON: ${(err as Error).message}`);
  }
}

/** Past the shutdown deadline, the time steps get to notice it before the process exits anyway. */
const SHUTDOWN_EXIT_MARGIN_MS = 1000;

async function runRole(role: Role, config: Readonly<SluiceConfig>): Promise<void> {
  const log = createLogger(config.logLevel);
  let app: RunningSluice | undefined;
  // A rejection nobody handled is a bug: logged with its cause and counted, never a silent
  // exit of a gateway that is otherwise serving. An exception nobody caught leaves the
  // process in an unknown state: logged, then the process exits for its supervisor to restart.
  process.on('unhandledRejection', (reason) => {
    log.error({ err: reason }, 'unhandled promise rejection (a bug); the process keeps serving');
    app?.metrics.unhandledRejections.inc();
  });
  process.on('uncaughtException', (err) => {
    log.fatal({ err }, 'uncaught exception (a bug); exiting');
    log.flush(() => process.exit(1));
  });
  app = await startSluice(role, config, log);
  let stopping = false;
  const exit = (code: number) => log.flush(() => process.exit(code));
  const stop = async (signal: string) => {
    if (stopping) {
      log.warn({ signal, step: app!.stopping() }, 'second signal: exiting without finishing the shutdown');
      return exit(1);
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
      exit(1);
    }, config.shutdownTimeoutMs + SHUTDOWN_EXIT_MARGIN_MS).unref();
    await app!.shutdown(deadline);
    exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

/**
 * What Sluice writes holds secrets (relay-master.key, key hashes, the pid file, the control
 * socket, chDB's parts and insert files): none of it is for other users, whatever the shell's umask.
 */
const PRIVATE_FILES_UMASK = 0o077;

export async function main(argv: string[]): Promise<number> {
  process.umask(PRIVATE_FILES_UMASK);
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
    case 'deliver':
      await runRole(command, config);
      return -1; // keep running
    case 'migrate':
      print(await migrateStorage(config));
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
    case 'agent-config':
      if (sub === 'set') {
        const { source, file } = options(rest, ['source', 'file']);
        const value = await readJsonFile(file);
        print(await withAdmin(config, (admin) => admin.setAgentConfig(source, value)));
        return 0;
      }
      if (sub === 'get') {
        const source = option(rest, 'source');
        print(await withAdmin(config, (admin) => admin.getAgentConfig(source)));
        return 0;
      }
      throw new UsageError(`unknown agent-config command: ${sub ?? '(none)'}`);
    case 'install-tokens':
      if (sub === 'create') {
        const source = option(rest, 'source');
        print(await withAdmin(config, (admin) => admin.createInstallToken(source)));
        return 0;
      }
      throw new UsageError(`unknown install-tokens command: ${sub ?? '(none)'}`);
    case 'deploys':
      if (sub === 'list') {
        const values = options(rest, [], ['source', 'service', 'environment', 'since', 'until', 'limit']);
        const limit = values.limit === undefined ? 100 : Number(values.limit);
        if (!Number.isSafeInteger(limit) || limit < 1) throw new UsageError('--limit: a whole number >= 1');
        const filter: DeployFilter = {
          sourceId: values.source,
          service: values.service,
          environment: values.environment,
          sinceNanos: timeOption('since', values.since, Date.now() - 7 * 86400e3),
          untilNanos: timeOption('until', values.until, Date.now() + 60e3),
          limit,
        };
        print(await withAdmin(config, (admin) => admin.listDeploys(filter)));
        return 0;
      }
      throw new UsageError(`unknown deploys command: ${sub ?? '(none)'}`);
    case 'relay': {
      const words = [sub, ...rest];
      const firstOption = words.findIndex((word) => word?.startsWith('--'));
      const command = (firstOption < 0 ? words : words.slice(0, firstOption)).filter(Boolean).join(' ');
      if (!OPERATOR_COMMANDS[command]) throw new UsageError(`unknown relay command: ${command || '(none)'}`);
      const input = await relayOptions(firstOption < 0 ? [] : (words.slice(firstOption) as string[]));
      print(await withAdmin(config, (admin) => admin.relay(command, input)));
      return 0;
    }
    case 'agents':
      if (sub === 'list') {
        const { source } = options(rest, [], ['source']);
        print(await withAdmin(config, (admin) => admin.listAgents(source)));
        return 0;
      }
      throw new UsageError(`unknown agents command: ${sub ?? '(none)'}`);
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
