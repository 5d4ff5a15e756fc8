/**
 * The `sluice` command line as parsed: help, version and usage mistakes, which must do nothing
 * else, and what each command hands to its implementation. In process with a recording
 * runtime, except a few runs of the executable itself on a data dir that must not appear.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { OPERATOR_COMMANDS } from '../relay/operator.ts';
import type { Admin } from './admin.ts';
import type { SluiceCommand } from './cli-command.ts';
import { cliReference, REFERENCE_PAGE, referenceBlock } from './cli-reference.ts';
import type { CliRuntime } from './cli-runtime.ts';
import { leaves, main, sluiceProgram } from './cli.ts';

const VERSION = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

interface Call { method: string; args: unknown[] }

/** Parses argv with a runtime that records what the command asked of it. */
async function sluice(...argv: string[]) {
  let stdout = '';
  let stderr = '';
  let loaded = false;
  const calls: Call[] = [];
  const admin = new Proxy({}, { get: (_target, method) => async (...args: unknown[]) => calls.push({ method: String(method), args }) }) as Admin;
  const runtime: CliRuntime = {
    serve: async (role) => void calls.push({ method: 'serve', args: [role] }),
    migrate: async () => void calls.push({ method: 'migrate', args: [] }),
    demo: async (options) => void calls.push({ method: 'demo', args: [options] }),
    examplePage: async (options) => void calls.push({ method: 'examplePage', args: [options] }),
    capacity: async (options) => void calls.push({ method: 'capacity', args: [options] }),
    admin: async (fn) => void (await fn(admin)),
  };
  const program = sluiceProgram({
    load: async () => {
      loaded = true;
      return runtime;
    },
    output: { writeOut: (text) => (stdout += text), writeErr: (text) => (stderr += text) },
  });
  const code = await main(argv, program);
  return { code, stdout, stderr, loaded, calls };
}

const everyCommand = (command: SluiceCommand): SluiceCommand[] => [command, ...(command.commands as SluiceCommand[]).flatMap(everyCommand)];
const words = (command: SluiceCommand) => command.path().split(' ').slice(1);
const program = sluiceProgram();

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-cli-parse-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('help', () => {
  const cases = everyCommand(program).flatMap((command) => [
    { argv: [...words(command), '--help'], command },
    { argv: [...words(command), '-h'], command },
    { argv: ['help', ...words(command)], command },
  ]);

  it.each(cases)('$argv prints the help of its command to stdout and does nothing else', async ({ argv, command }) => {
    const result = await sluice(...argv);
    expect(result).toMatchObject({ code: 0, stderr: '', loaded: false });
    // As wrapped for the terminal: within 80 columns, the usage line continued under itself.
    expect(result.stdout.split('\n').filter((line) => line.length > 80)).toEqual([]);
    expect(result.stdout.split('\n\n')[0]!.replace(/\s+/g, ' ')).toBe(`Usage: ${command.synopsis()}`);
    expect(result.stdout.replace(/\s+/g, ' ')).toContain(command.description());
  });

  it.each(['serve', 'gateway', 'consume', 'deliver'])('%s --help lists its ports and the settings it needs, with their defaults', async (role) => {
    const { stdout } = await sluice(role, '--help');
    const settings = stdout.slice(stdout.indexOf('Settings'));
    expect(settings).toMatch(/^ {2}SLUICE_OTLP_HTTP_PORT=4318 +OTLP\/HTTP and agent API port/m);
    if (role === 'serve') expect(settings).toMatch(/SLUICE_OTLP_GRPC_PORT=4317[\s\S]*SLUICE_RELAY_PORT=8080[\s\S]*SLUICE_CONSOLE_PORT=4320[\s\S]*SLUICE_DATA_DIR=.\/data/);
    if (role !== 'serve') expect(settings).toContain('NATS_URL');
    expect(settings).not.toMatch(/\]\(#/); // no Markdown link in a terminal
  });

  it('asks for help even where a value was expected: `--name --help` names nothing "--help"', async () => {
    const result = await sluice('sources', 'create', '--name', '--help');
    expect(result).toMatchObject({ code: 2, loaded: false, stderr: "sluice sources create: --name needs a value, not '--help' (see `sluice sources create --help`)\n" });
  });

  it('prints the help to stderr with exit code 2 when no command is given', async () => {
    for (const argv of [[], ['relay', 'sites']]) {
      const result = await sluice(...argv);
      expect(result).toMatchObject({ code: 2, stdout: '', loaded: false });
      expect(result.stderr).toMatch(/^Usage: sluice/);
    }
  });

  it('prints the version', async () => {
    expect(await sluice('--version')).toMatchObject({ code: 0, stdout: `${VERSION}\n`, stderr: '', loaded: false });
    expect(VERSION).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describe('usage mistakes: one line on stderr naming the command and its help, exit code 2, nothing run', () => {
  const mistakes: [string[], string][] = [
    [['sources', 'create', '--nmae', 'web'], "sluice sources create: unknown option '--nmae'; did you mean --name? (see `sluice sources create --help`)"],
    [['sources', 'create', '--name', 'a', '--name', 'b'], 'sluice sources create: --name given twice (see `sluice sources create --help`)'],
    [['deploys', 'list', '--limit=5', '--limit', '6'], 'sluice deploys list: --limit given twice (see `sluice deploys list --help`)'],
    [['sources', 'create'], 'sluice sources create: missing --name (see `sluice sources create --help`)'],
    [['sources', 'create', '--name', ''], 'sluice sources create: missing --name (see `sluice sources create --help`)'],
    [['sources', 'create', '--name'], "sluice sources create: option '--name <NAME>' argument missing (see `sluice sources create --help`)"],
    [['query'], "sluice query: missing required argument 'sql' (see `sluice query --help`)"],
    [['query', 'SELECT 1', 'SELECT 2'], "sluice query: too many arguments for 'query'. Expected 1 argument but got 2. (see `sluice query --help`)"],
    [['servee'], "sluice: unknown command 'servee'; did you mean serve? (see `sluice --help`)"],
    [['relay', 'recipients', 'update', '--site', 's', '--form', 'f', '--recipient', 'r'], 'sluice relay recipients update: missing --active (see `sluice relay recipients update --help`)'],
    [['relay', 'users', 'list', '--site', 's'], "sluice relay users list: unknown option '--site' (see `sluice relay users list --help`)"],
    [['deploys', 'list', '--limit', '0'], 'sluice deploys list: --limit: a whole number >= 1 (see `sluice deploys list --help`)'],
    [['demo', '--minutes', '0'], 'sluice demo: --minutes: a whole number from 1 to 10080 (see `sluice demo --help`)'],
    [['capacity', '--spans-per-second', 'lots'], 'sluice capacity: --spans-per-second: a number above 0 (see `sluice capacity --help`)'],
    [['capacity', '--spans-per-second', '1000', '--utilisation', '2'], 'sluice capacity: --utilisation: a fraction above 0, at most 1 (see `sluice capacity --help`)'],
    [['deploys', 'list', '--since', 'last week'], 'sluice deploys list: --since: not RFC 3339, epoch nanoseconds or a duration like 24h (see `sluice deploys list --help`)'],
  ];

  it.each(mistakes)('%j', async (argv, line) => {
    const result = await sluice(...argv);
    expect(result).toMatchObject({ code: 2, stdout: '', stderr: `${line}\n`, calls: [] });
  });

  it('refuses a file that is not JSON', async () => {
    const file = join(dir, 'not-json');
    await writeFile(file, '{ nope');
    const result = await sluice('agent-config', 'set', '--source', 's', '--file', file);
    expect(result).toMatchObject({ code: 2, calls: [] });
    expect(result.stderr).toMatch(/^sluice agent-config set: .*not-json is not JSON: .*\(see `sluice agent-config set --help`\)\n$/);
  });
});

describe('what each command runs', () => {
  it('runs every command given only its required options and arguments', async () => {
    const values: Record<string, string> = { '--spans-per-second': '1000000', '--active': 'true', '--secret-file': join(dir, 'secret'), '--file': join(dir, 'config.json') };
    await writeFile(values['--secret-file']!, 'shh\n');
    await writeFile(values['--file']!, '{}');
    for (const command of leaves(program)) {
      const argv = [...words(command), ...command.registeredArguments.map(() => 'x')];
      for (const option of command.options.filter((option) => command.isRequired(option))) argv.push(option.long!, values[option.long!] ?? 'x');
      const result = await sluice(...argv);
      expect({ argv, ...result }).toMatchObject({ argv, code: 0, stderr: '', loaded: true, calls: [expect.anything()] });
    }
  });

  it('hands the parsed values over', async () => {
    expect((await sluice('serve')).calls).toEqual([{ method: 'serve', args: ['serve'] }]);
    expect((await sluice('deliver')).calls).toEqual([{ method: 'serve', args: ['deliver'] }]);
    expect((await sluice('migrate')).calls).toEqual([{ method: 'migrate', args: [] }]);
    expect((await sluice('demo')).calls).toEqual([{ method: 'demo', args: [{ key: undefined, url: undefined, minutes: 15, requests: 300 }] }]);
    expect((await sluice('demo', '--key', 'slk_x', '--minutes', '60')).calls).toEqual([{ method: 'demo', args: [{ key: 'slk_x', url: undefined, minutes: 60, requests: 300 }] }]);
    expect((await sluice('sources', 'create', '--name=web')).calls).toEqual([{ method: 'createSource', args: ['web', undefined] }]);
    expect((await sluice('sources', 'create', '--name=web', '--tenant', 'ten_a')).calls).toEqual([{ method: 'createSource', args: ['web', 'ten_a'] }]);
    expect((await sluice('query', 'SELECT 1')).calls).toEqual([{ method: 'query', args: ['SELECT 1'] }]);
    expect((await sluice('capacity', '--spans-per-second', '2e6', '--utilisation', '0.5')).calls).toEqual([{ method: 'capacity', args: [{ spansPerSecond: 2e6, utilisation: 0.5 }] }]);
    expect((await sluice('agents', 'list')).calls).toEqual([{ method: 'listAgents', args: [undefined] }]);

    const file = join(dir, 'agent.json');
    await writeFile(file, '{"logLevel": "debug"}');
    expect((await sluice('agent-config', 'set', '--file', file, '--source', 's1')).calls).toEqual([{ method: 'setAgentConfig', args: ['s1', { logLevel: 'debug' }] }]);

    const before = Date.now();
    const [deploys] = (await sluice('deploys', 'list', '--service', 'api', '--since', '1h', '--until', '2026-11-20T10:00:00Z', '--limit', '5')).calls;
    expect(deploys).toMatchObject({ method: 'listDeploys', args: [{ service: 'api', untilNanos: '1795168800000000000', limit: 5 }] });
    const sinceMs = Number(BigInt((deploys!.args[0] as { sinceNanos: string }).sinceNanos) / 1_000_000n);
    expect(sinceMs).toBeGreaterThanOrEqual(before - 3600e3);
    expect(sinceMs).toBeLessThanOrEqual(Date.now() - 3600e3);
  });

  it('hands relay commands their options by flag name, every --origin, and secrets read from their file', async () => {
    // `relay example-page` serves a page of its own: no operation on the relay's data.
    const relayLeaves = leaves(program).filter((command) => words(command)[0] === 'relay').map((command) => words(command).slice(1).join(' ')).filter((name) => name !== 'example-page');
    expect(relayLeaves.sort()).toEqual(Object.keys(OPERATOR_COMMANDS).sort());

    const created = await sluice('relay', 'sites', 'create', '--tenant', 't', '--name', 'n', '--origin', 'https://a.test', '--origin', 'https://b.test');
    expect(created.calls).toEqual([{ method: 'relay', args: ['sites create', { tenant: 't', name: 'n', origin: ['https://a.test', 'https://b.test'] }] }]);
    const cleared = await sluice('relay', 'sites', 'update', '--site', 's', '--clear-origins', '--active', 'false');
    expect(cleared.calls).toEqual([{ method: 'relay', args: ['sites update', { site: 's', 'clear-origins': true, active: 'false' }] }]);

    const secretFile = join(dir, 'captcha-secret');
    await writeFile(secretFile, 'captcha-secret\n');
    const captcha = await sluice('relay', 'captcha', 'set', '--site', 's', '--provider', 'turnstile', '--site-key', 'k', '--secret-file', secretFile, '--score-threshold', '0.7');
    expect(captcha.calls).toEqual([{ method: 'relay', args: ['captcha set', { site: 's', provider: 'turnstile', 'site-key': 'k', 'score-threshold': '0.7', secret: 'captcha-secret' }] }]);
    const inbox = await sluice('relay', 'inbox', 'list', '--tenant', 't', '--limit', '5', '--wait-for', '3');
    expect(inbox.calls).toEqual([{ method: 'relay', args: ['inbox list', { tenant: 't', limit: '5', 'wait-for': '3' }] }]);
    // The loose values reach relay/operator.ts, which refuses them with its own message.
    const loose = await sluice('relay', 'forms', 'update', '--site', 's', '--form', 'f', '--active', '');
    expect(loose.calls).toEqual([{ method: 'relay', args: ['forms update', { site: 's', form: 'f', active: '' }] }]);
  });

  it('hands `relay example-page` its site key, form key, port and relay URL, and refuses a port that is none', async () => {
    const served = await sluice('relay', 'example-page', '--site-key', 'sk_abc', '--port', '8091', '--relay-url', 'http://127.0.0.1:8081');
    expect(served.calls).toEqual([{ method: 'examplePage', args: [{ siteKey: 'sk_abc', formKey: 'contact', port: 8091, relayUrl: 'http://127.0.0.1:8081' }] }]);
    expect((await sluice('relay', 'example-page', '--site-key', 'sk_abc', '--form-key', 'quote')).calls).toEqual([{ method: 'examplePage', args: [{ siteKey: 'sk_abc', formKey: 'quote', port: 8090 }] }]);
    const refused = await sluice('relay', 'example-page', '--site-key', 'sk_abc', '--port', '80x');
    expect({ code: refused.code, stderr: refused.stderr, calls: refused.calls }).toEqual({ code: 2, stderr: 'sluice relay example-page: --port: a port number, 0 to 65535 (see `sluice relay example-page --help`)\n', calls: [] });
  });

  it('reports a command that failed on stderr with exit code 1', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const program = sluiceProgram({ load: async () => ({ serve: async () => {}, migrate: async () => Promise.reject(new Error('cannot reach ClickHouse')), admin: async () => {}, demo: async () => {}, examplePage: async () => {}, capacity: async () => {} }) });
      expect(await main(['migrate'], program)).toBe(1);
      expect(stderr).toHaveBeenCalledWith('sluice: cannot reach ClickHouse\n');
    } finally {
      stderr.mockRestore();
    }
  });
});

it('docs/reference/cli.md holds the reference the parser prints (npm run docs:cli -- --write)', () => {
  expect(referenceBlock(readFileSync(REFERENCE_PAGE, 'utf8'))).toBe(cliReference());
});

describe('the sluice executable', () => {
  const SLUICE = fileURLToPath(new URL('./sluice.mjs', import.meta.url));
  /** A data dir that nothing may create: help and usage mistakes open no storage. */
  const dataDir = join(tmpdir(), `sluice-cli-untouched-${process.pid}`);
  const run = (...argv: string[]) =>
    promisify(execFile)(process.execPath, [SLUICE, ...argv], { env: { ...process.env, SLUICE_DATA_DIR: dataDir }, timeout: 30_000 }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (err) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
    );

  // A server started by mistake would not exit: these would time out.
  it.each([['serve', '--help'], ['migrate', '--help'], ['help', 'sources', 'create']])('%j prints help, exits 0, opens nothing', async (...argv) => {
    const result = await run(...argv);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toContain(`Usage: sluice ${argv.filter((word) => word !== 'help' && word !== '--help').join(' ')}`);
    expect(existsSync(dataDir)).toBe(false);
  });

  it('prints the version, and usage mistakes with exit code 2', async () => {
    expect(await run('--version')).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
    expect(await run('sources', 'create', '--nmae', 'web')).toEqual({
      code: 2,
      stdout: '',
      stderr: "sluice sources create: unknown option '--nmae'; did you mean --name? (see `sluice sources create --help`)\n",
    });
    const none = await run();
    expect(none).toMatchObject({ code: 2, stdout: '' });
    expect(none.stderr).toMatch(/^Usage: sluice <command>/);
    expect(existsSync(dataDir)).toBe(false);
  });
});
