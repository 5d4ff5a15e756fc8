/**
 * The README's reference of the `sluice` command, written from the parser itself so the two
 * cannot drift (bin/cli.test.ts fails when they differ).
 *
 *   npm run docs:cli              prints it
 *   npm run docs:cli -- --write   replaces the block between the markers in README.md
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sluiceProgram, leaves } from './cli.ts';

export const README = fileURLToPath(new URL('../README.md', import.meta.url));
export const START_MARKER = '<!-- cli-reference:start (npm run docs:cli -- --write) -->';
export const END_MARKER = '<!-- cli-reference:end -->';

/** Every command that runs something, with what it does and each of its options. */
export function cliReference(): string {
  const lines: string[] = [];
  for (const command of leaves(sluiceProgram())) {
    lines.push(`- \`${command.synopsis()}\` — ${command.description()}`);
    for (const option of command.options) lines.push(`  - \`${option.flags}\`: ${option.description}`);
    for (const arg of command.registeredArguments) lines.push(`  - \`<${arg.name()}>\`: ${arg.description}`);
  }
  return lines.join('\n') + '\n';
}

/** The README's block between the markers, or undefined when a marker is missing. */
export function readmeBlock(readme: string): string | undefined {
  const start = readme.indexOf(START_MARKER);
  const end = readme.indexOf(END_MARKER);
  if (start < 0 || end < start) return undefined;
  return readme.slice(start + START_MARKER.length, end).replace(/^\n/, '');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const reference = cliReference();
  if (!process.argv.includes('--write')) process.stdout.write(reference);
  else {
    const readme = readFileSync(README, 'utf8');
    if (readmeBlock(readme) === undefined) throw new Error(`${README}: no ${START_MARKER} … ${END_MARKER} block`);
    const start = readme.indexOf(START_MARKER) + START_MARKER.length;
    writeFileSync(README, `${readme.slice(0, start)}\n${reference}${readme.slice(readme.indexOf(END_MARKER))}`);
  }
}
