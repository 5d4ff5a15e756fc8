/**
 * The reference of the `sluice` command in docs/reference/cli.md, written from the parser itself
 * so the two cannot drift (bin/cli.test.ts fails when they differ).
 *
 *   npm run docs:cli              prints it
 *   npm run docs:cli -- --write   replaces the block between the markers in docs/reference/cli.md
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sluiceProgram, leaves } from './cli.ts';

/** The page that holds the reference between the markers. */
export const REFERENCE_PAGE = fileURLToPath(new URL('../docs/reference/cli.md', import.meta.url));
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

/** The page's block between the markers, or undefined when a marker is missing. */
export function referenceBlock(page: string): string | undefined {
  const start = page.indexOf(START_MARKER);
  const end = page.indexOf(END_MARKER);
  if (start < 0 || end < start) return undefined;
  return page.slice(start + START_MARKER.length, end).replace(/^\n/, '');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const reference = cliReference();
  if (!process.argv.includes('--write')) process.stdout.write(reference);
  else {
    const page = readFileSync(REFERENCE_PAGE, 'utf8');
    if (referenceBlock(page) === undefined) throw new Error(`${REFERENCE_PAGE}: no ${START_MARKER} … ${END_MARKER} block`);
    const start = page.indexOf(START_MARKER) + START_MARKER.length;
    writeFileSync(REFERENCE_PAGE, `${page.slice(0, start)}\n${reference}${page.slice(page.indexOf(END_MARKER))}`);
  }
}
