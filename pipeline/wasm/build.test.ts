/**
 * The committed pipeline/wasm/transcoder.wasm is what its C sources build to, byte for byte,
 * with the pinned toolchain (Debian's clang and lld 14, which deploy/services.sh installs): the
 * CI rebuilds it here and fails when the bytes differ, so the module that runs is the one whose
 * sources were reviewed. The build does not depend on where the checkout is, and refuses
 * another clang major version.
 */
import { execFile } from 'node:child_process';
import { chmod, cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const HERE = fileURLToPath(new URL('.', import.meta.url));
const BUILD = join(HERE, 'build.sh');

const dirs: string[] = [];
afterAll(() => Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true }))));
const tempDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-wasm-build-'));
  dirs.push(dir);
  return dir;
};

beforeAll(async () => {
  const found = await run('sh', ['-c', 'command -v clang && command -v wasm-ld']).catch(() => undefined);
  if (!found) throw new Error('clang and wasm-ld are not installed (Debian packages clang and lld): run `sudo bash deploy/services.sh`');
});

describe('pipeline/wasm/build.sh', () => {
  it('--check: the committed transcoder.wasm is what src/ builds to, and the toolchain is printed', async () => {
    const { stdout } = await run('sh', [BUILD, '--check'], { timeout: 120_000 });
    expect(stdout).toMatch(/^toolchain: .*clang version 14\.\d+\.\d+.*; .*LLD 14\.\d+\.\d+/m);
    expect(stdout).toMatch(/transcoder\.wasm is what src\/ builds to \(\d+ bytes\)/);
  }, 150_000);

  it('--check fails when the committed module is not what the sources build to', async () => {
    const copy = await tempDir();
    await cp(HERE, copy, { recursive: true, filter: (source) => !source.endsWith('.ts') });
    const committed = await readFile(join(copy, 'transcoder.wasm'));
    committed[committed.length - 1] ^= 1;
    await writeFile(join(copy, 'transcoder.wasm'), committed);
    const outcome = await run('sh', [join(copy, 'build.sh'), '--check'], { timeout: 120_000 }).then(() => 'passed', (err) => err.stderr as string);
    expect(outcome).toContain('transcoder.wasm differs from what src/ builds to: run npm run build:wasm and commit transcoder.wasm');
  }, 150_000);

  it('builds the same bytes in another directory (no paths in the output)', async () => {
    const copy = join(await tempDir(), 'somewhere', 'else');
    await cp(HERE, copy, { recursive: true, filter: (source) => !source.endsWith('.ts') && !source.endsWith('transcoder.wasm') });
    await run('sh', [join(copy, 'build.sh')], { timeout: 120_000 });
    const [built, committed] = await Promise.all([readFile(join(copy, 'transcoder.wasm')), readFile(join(HERE, 'transcoder.wasm'))]);
    expect(built.equals(committed)).toBe(true);
  }, 150_000);

  it('refuses a clang of another major version', async () => {
    const bin = await tempDir();
    const fake = join(bin, 'clang');
    await writeFile(fake, '#!/bin/sh\ncase "$1" in\n  --version) echo "Debian clang version 15.0.7" ;;\n  -print-prog-name=wasm-ld) command -v wasm-ld ;;\nesac\n');
    await chmod(fake, 0o755);
    const outcome = await run('sh', [BUILD, '--check'], { env: { ...process.env, CLANG: fake } }).then(() => 'passed', (err) => err.stderr as string);
    expect(outcome).toContain(`build.sh: ${fake} is 'Debian clang version 15.0.7', not clang 14`);
  });
});
