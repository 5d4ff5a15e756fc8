/**
 * The `sluice` command line, on commander. Parsing it loads nothing but commander: each
 * command imports its implementation (bin/cli-runtime.ts: configuration, chDB, NATS, storage,
 * the relay) in its action, so `--help`, `--version` and usage mistakes are fast and touch
 * nothing. Output for machines (JSON, JSONEachRow) goes to stdout; logs and errors go to stderr.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { CommanderError, type Help, type OutputConfiguration } from 'commander';
import { OPTIONS } from '../core/config.ts';
import { parseTimestamp } from '../pipeline/agent/time.ts';
import type { Admin, DeployFilter } from './admin.ts';
import type { Role } from './app.ts';
import { addRelayCommands } from './cli-relay.ts';
import { commanderExitCode, formatHelpItem, HELP_WIDTH, SluiceCommand, wrapUsage } from './cli-command.ts';
import type { CliRuntime } from './cli-runtime.ts';
import type { OperatorInput } from '../relay/operator.ts';

const VERSION: string = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

const loadRuntime = async (): Promise<CliRuntime> => (await import('./cli-runtime.ts')).runtime;

export interface ProgramOptions {
  /** The implementation of the commands, loaded when one runs. */
  load?: () => Promise<CliRuntime>;
  /** Where help and errors are written (stdout and stderr by default). */
  output?: OutputConfiguration;
}

/** The whole `sluice` command tree; parse it with `parseAsync(argv, { from: 'user' })`. */
export function sluiceProgram({ load = loadRuntime, output = {} }: ProgramOptions = {}): SluiceCommand {
  const admin = async (fn: (admin: Admin) => Promise<unknown>) => (await load()).admin(fn);
  const program = new SluiceCommand('sluice')
    .description('OTLP and agent ingest gateway, and notification relay, landing in ClickHouse')
    .version(VERSION)
    .exitOverride()
    .configureOutput(output)
    .configureHelp({
      helpWidth: Math.min(HELP_WIDTH, process.stdout.columns || HELP_WIDTH),
      // A method, not an arrow: commander calls it on the help, which knows the width.
      commandUsage(this: Help, command) {
        return wrapUsage((command as SluiceCommand).synopsis(), this);
      },
      subcommandTerm: (command) => (command as SluiceCommand).usageTerm(),
      formatItem: (term, _termWidth, description, helper) => formatHelpItem(term, description, helper),
    })
    .helpCommand('help [command...]', 'show the help of a command')
    .addHelpText('after', '\nConfiguration comes from SLUICE_* environment variables\n(see docs/reference/configuration.md).');
  program.hook('preAction', (_program, command) => (command as SluiceCommand).checkRequired());

  const roles: [Role, string][] = [
    ['serve', 'every role in one process: gateway, worker pool, storage (npm start)'],
    ['gateway', 'cluster: the HTTP/gRPC front end and worker pool; rows go to JetStream (needs NATS_URL)'],
    ['consume', 'cluster: a storage consumer, JetStream → storage; serves health and /metrics (needs NATS_URL)'],
    ['deliver', 'cluster: a relay delivery worker, delivery stream → email, WhatsApp, webhooks (needs NATS_URL and SLUICE_RELAY_MASTER_KEY); serves health and /metrics'],
  ];
  for (const [role, description] of roles) {
    const command = program.command(role).description(description).action(async () => (await load()).serve(role));
    command.addHelpText('after', () => roleSettingsHelp(role, command.createHelp()));
  }
  program.command('migrate')
    .description('create or upgrade the storage schema (also done at start); opens the storage only: in a cluster it needs CLICKHOUSE_URL, not NATS')
    .action(async () => (await load()).migrate());

  const sources = program.command('sources').description('ingestion sources and their API keys');
  sources.command('create').description('create a source and its first API key; prints {id, name, tenantId, apiKey, keyId, createdAt} (the key is shown only here); a tenant has at most 100 sources')
    .value('--name <NAME>', "the source's name", { required: true })
    .value('--tenant <ID>', 'the tenant that owns it (`sluice relay tenants list`); default: the default tenant, which the console\'s first owner joins')
    .action(({ name, tenant }) => admin((a) => a.createSource(name, tenant)));
  sources.command('list').description("sources and their keys' ids and revocation times (never the keys)")
    .value('--tenant <ID>', "only this tenant's sources")
    .action(({ tenant }) => admin((a) => a.listSources(tenant)));
  sources.command('add-key').description('issue another key for a source (for rotation); a source has at most 20 active keys: past that, revoke one first')
    .value('--source <ID>', 'the source', { required: true })
    .action(({ source }) => admin((a) => a.addKey(source)));
  sources.command('revoke-key').description('revoke a key; refused from the next request on')
    .value('--key <KEY_ID>', "the key's id, or the key itself", { required: true })
    .action(({ key }) => admin((a) => a.revokeKey(key)));

  program.command('demo').description('send sample telemetry of a small shop (traces, logs tied to them, metrics, two deploy markers) through the OTLP/HTTP endpoint of a running Sluice; prints what was sent')
    .value('--key <API_KEY>', "the source's API key to send with (default: create a source named demo and print its key)")
    .value('--url <URL>', "the ingest port's base URL (default: http://127.0.0.1:$SLUICE_OTLP_HTTP_PORT)")
    .value('--minutes <N>', 'how far back the sample reaches (default 15)')
    .value('--requests <N>', 'checkout requests in the sample (default 300)')
    .action(async (values, command: SluiceCommand) => {
      const whole = (name: string, fallback: number, max: number) => {
        const value = values[name] === undefined ? fallback : Number(values[name]);
        if (!Number.isSafeInteger(value) || value < 1 || value > max) command.error(`--${name}: a whole number from 1 to ${max}`);
        return value;
      };
      const options = { key: values.key, url: values.url, minutes: whole('minutes', 15, 10_080), requests: whole('requests', 300, 100_000) };
      await (await load()).demo(options);
    });

  program.command('capacity').description('the processes and cores a cluster needs for a span rate, from the newest bench report with cluster rows (bench/results, else the one in bench/reference; docs/guides/capacity.md)')
    .value('--spans-per-second <N>', 'the rate to plan for', { required: true })
    .value('--report <FILE>', 'a bench report (.json) instead of the newest in bench/results')
    .value('--utilisation <FRACTION>', 'the share of each core a role may use at that rate (default 0.6)')
    .action(async (values, command: SluiceCommand) => {
      const spansPerSecond = Number(values.spansPerSecond);
      if (!(spansPerSecond > 0) || !Number.isFinite(spansPerSecond)) command.error('--spans-per-second: a number above 0');
      const utilisation = values.utilisation === undefined ? undefined : Number(values.utilisation);
      if (utilisation !== undefined && !(utilisation > 0 && utilisation <= 1)) command.error('--utilisation: a fraction above 0, at most 1');
      await (await load()).capacity({ spansPerSecond, ...(utilisation !== undefined ? { utilisation } : {}), ...(values.report ? { report: values.report } : {}) });
    });

  program.command('query').description('run one read-only statement (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, EXISTS); prints JSONEachRow')
    .argument('<sql>', 'the statement')
    .action((sql: string) => admin((a) => a.query(sql)));

  const agentConfig = program.command('agent-config').description("the config a source's agents get");
  agentConfig.command('set').description("push a JSON object to the source's agents")
    .value('--source <ID>', 'the source', { required: true })
    .value('--file <FILE>', 'the file holding the object (- for stdin, at most 64 KiB)', { required: true })
    .action(async ({ source, file }, command: SluiceCommand) => {
      const config = await readJsonFile(command, file);
      await admin((a) => a.setAgentConfig(source, config));
    });
  agentConfig.command('get').description("the config the source's agents get")
    .value('--source <ID>', 'the source', { required: true })
    .action(({ source }) => admin((a) => a.getAgentConfig(source)));

  program.command('install-tokens').description('install tokens for agents').command('create')
    .description('issue a 24-hour install token and the key it carries; prints {id, token, url, keyId, expiresAt}; at most 10 unexpired per source; the key expires with the token unless its manifest was fetched')
    .value('--source <ID>', 'the source', { required: true })
    .action(({ source }) => admin((a) => a.createInstallToken(source)));

  program.command('deploys').description('deployment markers').command('list')
    .description('deployment markers, newest first')
    .value('--source <ID>', 'only this source')
    .value('--service <SERVICE>', 'only this service')
    .value('--environment <ENVIRONMENT>', 'only this environment')
    .value('--since <TIME>', 'from TIME: RFC 3339, epoch nanoseconds or a duration ago (30m, 24h, 7d); default 7d')
    .value('--until <TIME>', 'up to TIME, as --since; default now')
    .value('--limit <N>', 'at most N (default 100)')
    .action(async (values, command: SluiceCommand) => {
      const filter = deployFilter(command, values);
      await admin((a) => a.listDeploys(filter));
    });

  program.command('agents').description('agents and their heartbeats').command('list')
    .description('the latest heartbeat of each agent (version, host, status, last seen), newest first')
    .value('--source <ID>', 'only this source')
    .action(({ source }) => admin((a) => a.listAgents(source)));

  const relay = program.command('relay').description('relay administration without the HTTP API (through the running server, or on the data dir)');
  addRelayCommands(relay);
  for (const command of leaves(relay)) {
    const operation = command.path().slice(relay.path().length + 1);
    command.action(async () => {
      const input = await relayInput(command);
      await admin((a) => a.relay(operation, input));
    });
  }
  // Not an operation on the relay's data: a page of its own, served until stopped.
  const examplePage = relay.command('example-page')
    .description('serve a page on 127.0.0.1 with the form snippet filled in for a site, to try it in a browser (until Ctrl-C)')
    .value('--site-key <KEY>', "the site's siteKey (sk_…)", { required: true })
    .value('--form-key <KEY>', "the form's formKey (default contact)")
    .value('--port <PORT>', 'its port on 127.0.0.1 (default 8090); the site must allow the origin http://127.0.0.1:<PORT>')
    .value('--relay-url <URL>', 'where the browser reaches the relay (default SLUICE_RELAY_PUBLIC_URL, else this host and SLUICE_RELAY_PORT)');
  examplePage.action(async (values: Record<string, string | undefined>) => {
    const port = values.port === undefined ? 8090 : Number(values.port);
    if (!/^\d+$/.test(values.port ?? '0') || port > 65535) examplePage.error('--port: a port number, 0 to 65535');
    if (values.relayUrl !== undefined && !/^https?:\/\/[^\s]+$/.test(values.relayUrl)) examplePage.error('--relay-url: an http:// or https:// URL');
    await (await load()).examplePage({ siteKey: values.siteKey!, formKey: values.formKey ?? 'contact', port, ...(values.relayUrl ? { relayUrl: values.relayUrl } : {}) });
  });
  return program;
}

/** The commands that run something, in the order of the help. */
export function leaves(command: SluiceCommand): SluiceCommand[] {
  const children = command.commands as SluiceCommand[];
  return children.length ? children.flatMap(leaves) : [command];
}

const DURATION_UNITS: Record<string, number> = { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 };

function deployFilter(command: SluiceCommand, values: Record<string, string | undefined>): DeployFilter {
  const limit = values.limit === undefined ? 100 : Number(values.limit);
  if (!Number.isSafeInteger(limit) || limit < 1) command.error('--limit: a whole number >= 1');
  return {
    sourceId: values.source,
    service: values.service,
    environment: values.environment,
    sinceNanos: timeOption(command, 'since', values.since, Date.now() - 7 * 86400e3),
    untilNanos: timeOption(command, 'until', values.until, Date.now() + 60e3),
    limit,
  };
}

/** A --since/--until value: RFC 3339, epoch nanoseconds, or a duration ago (30m, 24h, 7d). */
function timeOption(command: SluiceCommand, name: string, value: string | undefined, fallbackMs: number): string {
  if (value === undefined) return String(BigInt(fallbackMs) * 1_000_000n);
  const ago = /^(\d+)([smhd])$/.exec(value);
  if (ago) return String(BigInt(Date.now() - Number(ago[1]) * DURATION_UNITS[ago[2]!]!) * 1_000_000n);
  const nanos = parseTimestamp(value);
  if (nanos === undefined) command.error(`--${name}: not RFC 3339, epoch nanoseconds or a duration like 24h`);
  return String(nanos);
}

const readText = (path: string) => readFile(path === '-' ? '/dev/stdin' : path, 'utf8');

async function readJsonFile(command: SluiceCommand, path: string): Promise<unknown> {
  const text = await readText(path);
  try {
    return JSON.parse(text);
  } catch (err) {
    command.error(`${path} is not JSON: ${(err as Error).message}`);
  }
}

/** A relay command's options as relay/operator.ts reads them: by flag name; a secret is read from its file. */
async function relayInput(command: SluiceCommand): Promise<OperatorInput> {
  const input: OperatorInput = {};
  for (const option of command.options) {
    const value = command.getOptionValue(option.attributeName());
    if (value !== undefined) input[option.name()] = value;
  }
  const { 'secret-file': secretFile, ...rest } = input;
  return typeof secretFile === 'string' ? { ...rest, secret: (await readText(secretFile)).trim() } : rest;
}

/**
 * Runs a command line; resolves to its exit code: 0, 1 when the command failed, 2 for a usage
 * mistake (and for no command at all: the help goes to stderr). `sluice help a b` is `sluice a b --help`.
 * A server role resolves once it serves, and runs until a signal stops it.
 */
/** The settings each role's --help lists: its ports first, then what it cannot run without. */
const ROLE_SETTINGS: Record<Role, string[]> = {
  serve: ['SLUICE_OTLP_HTTP_PORT', 'SLUICE_OTLP_GRPC_PORT', 'SLUICE_RELAY_PORT', 'SLUICE_CONSOLE_PORT', 'SLUICE_QUERY_PORT', 'SLUICE_DATA_DIR', 'SLUICE_RELAY_MASTER_KEY', 'SLUICE_PUBLIC_URL', 'SLUICE_DELIVERY_INBOX', 'SLUICE_LOG_LEVEL'],
  gateway: ['SLUICE_OTLP_HTTP_PORT', 'SLUICE_OTLP_GRPC_PORT', 'SLUICE_RELAY_PORT', 'SLUICE_CONSOLE_PORT', 'NATS_URL', 'REDIS_URL', 'SLUICE_RELAY_MASTER_KEY', 'SLUICE_PUBLIC_URL', 'SLUICE_LOG_LEVEL'],
  consume: ['SLUICE_OTLP_HTTP_PORT', 'NATS_URL', 'CLICKHOUSE_URL', 'SLUICE_LOG_LEVEL'],
  deliver: ['SLUICE_OTLP_HTTP_PORT', 'NATS_URL', 'SLUICE_RELAY_MASTER_KEY', 'SLUICE_LOG_LEVEL'],
};

/** A role's settings from the one config table: name and default, and the first sentence of its description. */
function roleSettingsHelp(role: Role, helper: Help): string {
  const items = ROLE_SETTINGS[role].map((env) => {
    const option = OPTIONS.find((candidate) => candidate.env === env)!;
    const term = option.default === '' || option.default === 0 && env === 'SLUICE_QUERY_PORT' ? env : `${env}=${String(option.default)}`;
    return formatHelpItem(term, firstSentence(option.doc), helper);
  });
  return `\nSettings (environment variables; all of them: docs/reference/configuration.md):\n${items.join('\n')}\n`;
}

/** A description's first sentence, its links (relative to docs/reference/) as the page they lead to. */
const firstSentence = (text: string) =>
  (/^.*?\.(?=\s|$)/.exec(text)?.[0] ?? text).replace(/\[[^\]]+\]\(([^)#]*)[^)]*\)/g, (_link, page: string) => posix.join('docs/reference', page));

export async function main(argv: string[], program = sluiceProgram()): Promise<number> {
  const args = argv[0] === 'help' ? [...argv.slice(1), '--help'] : argv;
  try {
    await program.parseAsync(args, { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return commanderExitCode(err);
    process.stderr.write(`sluice: ${(err as Error).message}\n`);
    return 1;
  }
}

export async function run(argv: string[]): Promise<void> {
  process.exitCode = await main(argv);
}
