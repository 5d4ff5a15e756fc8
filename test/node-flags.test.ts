/**
 * Every way Sluice is started passes bin/node-flags.ts's Node flags: they only work on the
 * command line. The executable's shebang (`npx sluice`), `npm start` and the image's ENTRYPOINT
 * spell them out; a process started the shebang's way really runs with them.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { SLUICE_NODE_FLAGS } from '../bin/node-flags.ts';

const file = (path: string) => readFileSync(fileURLToPath(new URL(`../${path}`, import.meta.url)), 'utf8');
const flags = SLUICE_NODE_FLAGS.join(' ');

it('starts every Sluice process with its Node flags', async () => {
  expect(file('bin/sluice.mjs').split('\n')[0]).toBe(`#!/usr/bin/env -S node ${flags}`);
  const pkg = JSON.parse(file('package.json')) as { scripts: Record<string, string>; bin: Record<string, string> };
  expect(pkg.scripts.start).toContain(`node ${flags} bin/sluice.mjs serve`);
  expect(pkg.bin.sluice).toBe('bin/sluice.mjs');
  expect(file('Dockerfile')).toContain(`ENTRYPOINT ["node", ${SLUICE_NODE_FLAGS.map((f) => JSON.stringify(f)).join(', ')}, "bin/sluice.mjs"]`);

  // The shebang's own way (as npx runs it): the process's execArgv carries the flags.
  // (env -S splits on spaces: the script has none.)
  const { stdout } = await promisify(execFile)('/usr/bin/env', ['-S', `node ${flags} -p process.execArgv.join()`]);
  expect(stdout.trim().split(',').slice(0, SLUICE_NODE_FLAGS.length)).toEqual(SLUICE_NODE_FLAGS);
});
