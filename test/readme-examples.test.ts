/**
 * The README's shell examples run as written, and so do those of every page of docs/. Every ```sh
 * block of a document runs, in the document's order, in one bash session (variables set by one
 * block serve the next; a page sets up what it needs itself, nothing carries over from the README),
 * against a `sluice serve` of its own started as the document's `npm start` line starts it
 * (`SLUICE_DELIVERY_INBOX=true npm start` in the relay tutorial; a port it names is the test's),
 * from a directory where `npx sluice` finds Sluice as an installed package would. `set -euo pipefail`, and curl fails on an HTTP error status, so any command
 * that does not work fails the test. The only change to the text: the default ports (4318, 4317,
 * 8080, and 8123 of the query endpoint, which this server has on) become the test server's, so
 * the test can run beside others. A comment line holding JSON (`# {"accepted":2}`) is what the
 * block prints: the test finds each in the block's output (spacing aside, "…" standing for
 * anything). A block right under
 * `<!-- not run by test/readme-examples.test.ts: why -->` is skipped (installing, the test suite
 * itself, a cluster). The server and the CLI load test/no-egress.mjs: the documents' example
 * addresses (hooks.acme.example …) are never looked up or connected to.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from './harness.ts';
import { freePort } from './sluice-processes.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SKIP = /<!-- not run by test\/readme-examples\.test\.ts: [^>]+ -->\s*$/;

/** A document's sh blocks in order, each with its line number; skipped ones left out unless asked for. */
function shellExamples(markdown: string, withSkipped = false): { line: number; text: string }[] {
  const lines = markdown.split('\n');
  const blocks: { line: number; text: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== '```sh') continue;
    const end = lines.indexOf('```', i + 1);
    if (withSkipped || !SKIP.test(lines[i - 1] ?? '')) blocks.push({ line: i + 1, text: lines.slice(i + 1, end).join('\n') });
    i = end;
  }
  return blocks;
}

/** The settings a document starts Sluice with: the assignments before its first `npm start` (`SLUICE_DELIVERY_INBOX=true npm start`). */
export function startSettings(markdown: string): Record<string, string> {
  for (const { text } of shellExamples(markdown, true)) {
    for (const line of text.split('\n')) {
      const start = /^((?:[A-Z][A-Z0-9_]*=\S*\s+)*)npm start\b/.exec(line);
      if (start) return Object.fromEntries(start[1]!.trim().split(/\s+/).filter(Boolean).map((pair) => pair.split('=', 2) as [string, string]));
    }
  }
  return {};
}

/** The README, then every page of docs/ with a shell example, by path. */
async function documents(): Promise<string[]> {
  const pages = (await readdir(join(ROOT, 'docs'), { recursive: true })).filter((name) => name.endsWith('.md')).sort();
  const withShell: string[] = [];
  for (const page of pages) if (shellExamples(await readFile(join(ROOT, 'docs', page), 'utf8')).length > 0) withShell.push(join('docs', page));
  return ['README.md', ...withShell];
}

/** What a document's run printed and where, for the checks of one document. */
interface Ran {
  stdout: string;
  serverLog: string;
  /** Runs `npx sluice …` as the examples did: in their directory, with their settings. */
  sluice(args: string[]): Promise<string>;
}

/** Checks beyond what the blocks say they print, by document. */
const AFTERWARDS: Record<string, (ran: Ran) => Promise<void>> = {
  'README.md': async ({ stdout, serverLog }) => {
    // Without a terminal, the console's first-run link is a plain line of its own, not only in a JSON log line.
    expect(serverLog).toMatch(/^Sign in to the console the first time[^\n]*: http:\/\/\S+\/first-run#token=frt_\S+$/m);
    // What the quick start says its query prints: one row per service of the demo.
    expect(stdout).toMatch(/"ServiceName":"payment","spans":\d+,"errors":[1-9]\d*/);
  },
  'docs/guides/relay.md': async ({ stdout, serverLog, sluice }) => {
    expect(serverLog).toContain('DEVELOPMENT INBOX (SLUICE_DELIVERY_INBOX=true): no email, WhatsApp message or webhook is sent');
    // The tutorial's form submission ends in the inbox: its email, its WhatsApp message and its webhook.
    const submissionId = /"submissionId":"([0-9a-f-]{36})"/.exec(stdout)?.[1];
    expect(submissionId).toBeDefined();
    const { messages } = JSON.parse(await sluice(['relay', 'inbox', 'list', '--limit', '100'])) as { messages: Array<{ submissionId: string; channel: string; destination: string; text: string }> };
    const delivered = messages.filter((message) => message.submissionId === submissionId).sort((a, b) => a.channel.localeCompare(b.channel));
    expect(delivered.map(({ channel, destination }) => [channel, destination])).toEqual([
      ['email', 'sales@acme.example'], ['webhook', 'https://hooks.acme.example/forms'], ['whatsapp', '+4915112345678'],
    ]);
    expect(delivered[0]!.text).toContain('message: Hello from the tutorial');
    expect(JSON.parse(delivered[1]!.text)).toMatchObject({ type: 'submission.created', data: { submissionId, formKey: 'contact', fields: { name: 'Ada Lovelace' } } });
  },
};

describe.each(await documents())('the shell examples of %s', { timeout: 300_000 }, (document) => {
  let dir: string;
  let server: ChildProcess;
  const serverLog: string[] = [];
  const ports = { http: 0, grpc: 0, relay: 0, query: 0, console: 0 };
  let env: NodeJS.ProcessEnv;
  let markdown: string;

  beforeAll(async () => {
    markdown = await readFile(join(ROOT, document), 'utf8');
    dir = await mkdtemp(join(tmpdir(), 'sluice-readme-'));
    // `npx sluice` here finds node_modules/.bin/sluice, as in a project that installed Sluice.
    await mkdir(join(dir, 'node_modules', '.bin'), { recursive: true });
    await symlink(join(ROOT, 'bin', 'sluice.mjs'), join(dir, 'node_modules', '.bin', 'sluice'));
    for (const name of Object.keys(ports) as (keyof typeof ports)[]) ports[name] = await freePort();
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('SLUICE_') && key !== 'NODE_OPTIONS'));
    env = {
      ...inherited,
      // This Node first (the suite runs on Node 20 and 24), npm never asks the registry.
      PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
      npm_config_offline: 'true',
      npm_config_update_notifier: 'false',
      SLUICE_LOG_LEVEL: 'warn',
      NODE_OPTIONS: `--import ${join(ROOT, 'test', 'no-egress.mjs')}`,
      // As the document's `npm start` line starts the server; its commands run with the same settings.
      ...startSettings(markdown),
      // The ports are the test's, whatever the line says (`SLUICE_QUERY_PORT=8123 npm start`): the examples' are rewritten to them.
      SLUICE_OTLP_HTTP_PORT: String(ports.http),
      SLUICE_OTLP_GRPC_PORT: String(ports.grpc),
      SLUICE_RELAY_PORT: String(ports.relay),
      SLUICE_CONSOLE_PORT: String(ports.console),
      SLUICE_QUERY_PORT: String(ports.query),
      SLUICE_QUERY_PASSWORD: 'readme-examples-query-password',
    };
    server = spawn(process.execPath, [join(ROOT, 'bin', 'sluice.mjs'), 'serve'], { cwd: dir, env: { ...env, SLUICE_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
    server.stdout!.on('data', (chunk: Buffer) => serverLog.push(chunk.toString()));
    server.stderr!.on('data', (chunk: Buffer) => serverLog.push(chunk.toString()));
    await eventually(() => serverLog.join('').includes('sluice is serving'), 60_000, 100).catch((err) => {
      throw new Error(`sluice serve did not start:\n${serverLog.join('')}`, { cause: err });
    });
  });

  afterAll(async () => {
    if (server && server.exitCode === null) {
      server.kill('SIGTERM');
      await new Promise((resolve) => server.once('exit', resolve));
    }
    await rm(dir, { recursive: true, force: true });
  });

  it('run as written, in order, in one shell, and print what they say they print', async () => {
    const blocks = shellExamples(markdown);
    // The README keeps the quick start's two runnable blocks; a page of docs/ is here for having one.
    expect(blocks.length).toBeGreaterThan(document === 'README.md' ? 1 : 0);
    const script = [
      'set -euo pipefail',
      // An HTTP error status fails the example (curl -s alone would exit 0).
      'curl() { command curl --fail-with-body --max-time 30 "$@"; }',
      ...blocks.map(({ line, text }) =>
        [`echo "=== ${document}:${line}" >&2`, `echo "${BLOCK_MARK}${line}"`, 'set -x', localPorts(text, ports), 'set +x'].join('\n'),
      ),
    ].join('\n');
    const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile('bash', ['-c', script], { cwd: dir, env, timeout: 240_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
    if (run.code !== 0) console.log(`stdout:\n${run.stdout}\nstderr:\n${run.stderr}\nserver:\n${serverLog.join('').slice(-5000)}`);
    expect(run.code, run.stderr.split('\n').slice(-30).join('\n')).toBe(0);
    // Each block's "# {…}" lines are what it prints: every one is found in what the block printed.
    const printed = printedByBlock(run.stdout);
    const unmet = blocks.flatMap(({ line, text }) => documentedOutputs(text)
      .filter((expected) => !outputMatches(localPorts(expected, ports), printed.get(line) ?? ''))
      .map((expected) => `${document}:${line}: ${expected}\n  printed: ${(printed.get(line) ?? '').slice(0, 600)}`));
    expect(unmet).toEqual([]);
    // The examples write no file (secrets above all) into the directory they run in.
    expect((await readdir(dir)).filter((name) => name !== 'node_modules' && name !== SERVER_DATA_DIR)).toEqual([]);
    const sluice = async (args: string[]) => (await promisify(execFile)('npx', ['sluice', ...args], { cwd: dir, env })).stdout;
    await AFTERWARDS[document]?.({ stdout: run.stdout, serverLog: serverLog.join(''), sluice });
  });
});

const BLOCK_MARK = '=== block at line ';
/** Where `sluice serve` keeps its data when started in a directory, as `npm start` is. */
const SERVER_DATA_DIR = 'data';

/** The default ports become the test server's, so the test can run beside others. */
function localPorts(text: string, ports: { http: number; grpc: number; relay: number; query: number }): string {
  return text.replaceAll('127.0.0.1:4318', `127.0.0.1:${ports.http}`).replaceAll('localhost:4318', `localhost:${ports.http}`).replaceAll('127.0.0.1:4317', `127.0.0.1:${ports.grpc}`)
    .replaceAll('127.0.0.1:8080', `127.0.0.1:${ports.relay}`).replaceAll('127.0.0.1:8123', `127.0.0.1:${ports.query}`);
}

/** What each block printed on stdout, by the block's line. */
function printedByBlock(stdout: string): Map<number, string> {
  const printed = new Map<number, string>();
  for (const part of stdout.split(BLOCK_MARK).slice(1)) {
    const newline = part.indexOf('\n');
    printed.set(Number(part.slice(0, newline)), part.slice(newline + 1));
  }
  return printed;
}

/** A block's documented outputs: its comment lines that hold JSON (`# {"accepted":2}`). */
export function documentedOutputs(block: string): string[] {
  return block.split('\n').filter((line) => /^# [{[]/.test(line)).map((line) => line.slice(2));
}

/**
 * Whether `printed` holds `expected`, spacing aside (the CLI indents its JSON, curl's answers
 * are compact), with each "…" standing for anything.
 */
export function outputMatches(expected: string, printed: string): boolean {
  const squeeze = (text: string) => text.replace(/\s+/g, '');
  const pattern = squeeze(expected).split('…').map((piece) => piece.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*?');
  return new RegExp(pattern, 's').test(squeeze(printed));
}
