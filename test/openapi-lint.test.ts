/**
 * Both ports' OpenAPI documents pass Redocly's recommended ruleset with no error and no warning:
 * the CLI as a user runs it (`redocly lint --extends recommended <file>`), offline (telemetry and
 * the update check off: it opens no connection).
 *
 * One rule is waived, for named operations only: operation-4xx-response wants every operation to
 * document a client error, and health, the document itself and its page answer nothing but 200
 * (documenting a 4xx they never send would be false). The waivers are Redocly's ignore file;
 * each must be used, so one that no longer applies fails the test.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '../gateway/openapi.ts';
import { relayOpenApiDocument } from '../relay/openapi.ts';

const REDOCLY = fileURLToPath(new URL('../node_modules/@redocly/cli/bin/cli.js', import.meta.url));
const OFFLINE = { REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };

/** The operations that cannot answer a 4xx, on both ports. */
const ALWAYS_200 = ['/api/v1/health', '/api/v1/openapi.json', '/api/v1/docs'];
const pointer = (path: string) => `'#/paths/${path.replaceAll('~', '~0').replaceAll('/', '~1')}/get/responses'`;

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-openapi-'));
  await writeFile(join(dir, 'ingest.json'), JSON.stringify(openApiDocument(), null, 2));
  await writeFile(join(dir, 'relay.json'), JSON.stringify(relayOpenApiDocument(), null, 2));
  const waivers = ALWAYS_200.map((path) => `    - ${pointer(path)}`).join('\n');
  await writeFile(join(dir, '.redocly.lint-ignore.yaml'), ['ingest.json', 'relay.json'].map((file) => `${file}:\n  operation-4xx-response:\n${waivers}\n`).join(''));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: Array<{ ruleId: string; message: string; location: Array<{ pointer: string }> }>;
}

async function lint(file: string): Promise<LintReport> {
  // Exit code 1 on errors: the report is on stdout either way.
  const run = promisify(execFile)(process.execPath, [REDOCLY, 'lint', '--extends', 'recommended', '--format', 'json', file], {
    cwd: dir,
    env: { ...process.env, ...OFFLINE },
    timeout: 60_000,
  }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
  const { stdout } = await run;
  return JSON.parse(stdout) as LintReport;
}

describe('redocly lint --extends recommended', () => {
  it.each(['ingest.json', 'relay.json'])('finds no error and no warning in %s', async (file) => {
    const report = await lint(file);
    const problems = report.problems.map((p) => `${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`);
    expect(problems).toEqual([]);
    expect(report.totals).toEqual({ errors: 0, warnings: 0, ignored: ALWAYS_200.length });
  });
});
