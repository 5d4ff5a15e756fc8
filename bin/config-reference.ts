/**
 * The settings table of docs/reference/configuration.md, written from the one table of options
 * (core/config.ts OPTIONS) so the two cannot drift (core/config.test.ts fails when they differ).
 *
 *   npm run docs:config              prints it
 *   npm run docs:config -- --write   replaces the table between the markers in the page
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { OPTIONS } from '../core/config.ts';

export const CONFIG_PAGE = fileURLToPath(new URL('../docs/reference/configuration.md', import.meta.url));
export const START_MARKER = '<!-- config-reference:start (npm run docs:config -- --write) -->';
export const END_MARKER = '<!-- config-reference:end -->';

function shownDefault(option: (typeof OPTIONS)[number]): string {
  if (option.shownDefault !== undefined) return option.shownDefault;
  if (option.default === '') return '(empty)';
  if (Array.isArray(option.default)) return option.default.length === 0 ? '(none)' : `\`${option.default.join(',')}\``;
  return `\`${String(option.default)}\``;
}

/** The table: variable, config path, default, meaning; one row per option, in the table's order. */
export function configReference(): string {
  const rows = OPTIONS.map((option) => `| \`${option.env}\` | \`${option.path}\` | ${shownDefault(option)} | ${option.doc} |`);
  return ['| variable | config path | default | meaning |', '|---|---|---|---|', ...rows].join('\n') + '\n';
}

/** The page's table between the markers, or undefined when a marker is missing. */
export function referenceTable(page: string): string | undefined {
  const start = page.indexOf(START_MARKER);
  const end = page.indexOf(END_MARKER);
  if (start < 0 || end < start) return undefined;
  return page.slice(start + START_MARKER.length, end).replace(/^\n/, '');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const table = configReference();
  if (!process.argv.includes('--write')) process.stdout.write(table);
  else {
    const page = readFileSync(CONFIG_PAGE, 'utf8');
    if (referenceTable(page) === undefined) throw new Error(`${CONFIG_PAGE}: no ${START_MARKER} … ${END_MARKER} block`);
    const start = page.indexOf(START_MARKER) + START_MARKER.length;
    writeFileSync(CONFIG_PAGE, `${page.slice(0, start)}\n${table}${page.slice(page.indexOf(END_MARKER))}`);
  }
}
