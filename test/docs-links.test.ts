/**
 * The documentation has no dead end: every relative link of README.md, ARCHITECTURE.md,
 * bench/*.md and docs/**\/*.md leads to a file that exists, and every `#anchor` to a heading of
 * the page it names, by GitHub's rules for heading ids (lower case; punctuation other than
 * hyphens and underscores removed; each space a hyphen; a repeated id gets -1, -2…). Links to
 * other sites are not followed. Every page of docs/ is on the README's documentation map and
 * links back to it.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The pages checked, relative to the root. */
function pages(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.md')).map((name) => join('docs', name));
  const bench = readdirSync(join(ROOT, 'bench')).filter((name) => name.endsWith('.md')).map((name) => join('bench', name));
  return ['README.md', 'ARCHITECTURE.md', ...bench, ...docs.sort()];
}

/** A page's text outside fenced code blocks and HTML comments, one entry per line (code lines empty, so line numbers hold). */
export function proseLines(markdown: string): string[] {
  const lines = markdown.replace(/<!--[\s\S]*?-->/g, (comment) => comment.replace(/[^\n]/g, '')).split('\n');
  let fence: string | undefined;
  return lines.map((line) => {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined && marker) {
      fence = marker;
      return '';
    }
    if (fence !== undefined) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = undefined;
      return '';
    }
    return line;
  });
}

/** The id GitHub gives a heading's text. */
export function headingId(text: string): string {
  const plain = text
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link reads as its text
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase();
  return plain.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** The ids of a page's headings, in order, repeated ones numbered as GitHub numbers them. */
export function headingIds(markdown: string): string[] {
  const seen = new Map<string, number>();
  const ids: string[] = [];
  for (const line of proseLines(markdown)) {
    const heading = /^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (!heading) continue;
    const id = headingId(heading[1]!);
    const count = seen.get(id);
    seen.set(id, (count ?? -1) + 1);
    ids.push(count === undefined ? id : `${id}-${count + 1}`);
  }
  return ids;
}

/** A page's link targets with their line numbers: inline links and images, and reference definitions. */
export function links(markdown: string): { line: number; target: string }[] {
  const found: { line: number; target: string }[] = [];
  // Inline code cannot hold a link: blank it, keeping the line breaks of a span across lines.
  const text = proseLines(markdown).join('\n').replace(/(`+)[\s\S]*?\1/g, (code) => code.replace(/[^\n]/g, ' '));
  const lineOf = (index: number) => text.slice(0, index).split('\n').length;
  for (const match of text.matchAll(/\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)/g)) {
    found.push({ line: lineOf(match.index), target: match[1]!.replace(/^<|>$/g, '') });
  }
  for (const match of text.matchAll(/^ {0,3}\[[^\]]+\]:\s*(\S+)/gm)) found.push({ line: lineOf(match.index), target: match[1]! });
  return found;
}

/** What is wrong with each relative link of a page: a file that does not exist, an anchor that is no heading. */
function brokenLinks(page: string): string[] {
  const markdown = readFileSync(join(ROOT, page), 'utf8');
  const problems: string[] = [];
  for (const { line, target } of links(markdown)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue; // another site, mailto:
    const hash = target.indexOf('#');
    const path = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
    const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const file = path === '' ? join(ROOT, page) : resolve(dirname(join(ROOT, page)), path);
    const where = `${page}:${line}: ${target}`;
    if (relative(ROOT, file).startsWith('..')) problems.push(`${where}: outside the repository`);
    else if (!existsSync(file)) problems.push(`${where}: no such file`);
    else if (anchor !== undefined && file.endsWith('.md') && statSync(file).isFile() && !headingIds(readFileSync(file, 'utf8')).includes(anchor)) {
      problems.push(`${where}: no heading #${anchor} in ${relative(ROOT, file)}`);
    }
  }
  return problems;
}

describe('the documentation links', () => {
  it('gives headings the ids GitHub gives them', () => {
    expect(headingIds('# Sluice\n## The `sluice` command\n### Relay: set up a site\n## Differences from the exporter\'s layout\n### The local log (embedded default)')).toEqual([
      'sluice', 'the-sluice-command', 'relay-set-up-a-site', 'differences-from-the-exporters-layout', 'the-local-log-embedded-default',
    ]);
    expect(headingIds('### 2026-11-28, commits `d5e837f` and `5cfb96c`: the gateway alone at 70 %\n### A native or WebAssembly transcoder?\n## 1. Start Sluice')).toEqual([
      '2026-11-28-commits-d5e837f-and-5cfb96c-the-gateway-alone-at-70-', 'a-native-or-webassembly-transcoder', '1-start-sluice',
    ]);
    expect(headingIds('#### otlp-http-protobuf-gzip\n#### otlp-http-protobuf-gzip\n## `sluice_build_info` — what\n```sh\n# {"accepted":2}\n```\n#### otlp-http-protobuf-gzip')).toEqual([
      'otlp-http-protobuf-gzip', 'otlp-http-protobuf-gzip-1', 'sluice_build_info--what', 'otlp-http-protobuf-gzip-2',
    ]);
  });

  it('finds links in prose, not in code', () => {
    const markdown = 'See [a](x.md#b) and ![c](d.png).\n`[not](a-link.md)`\n```sh\n[nor](this.md)\n```\n[ref]: defs.md\n<!-- [hidden](gone.md) -->';
    expect(links(markdown)).toEqual([{ line: 1, target: 'x.md#b' }, { line: 1, target: 'd.png' }, { line: 6, target: 'defs.md' }]);
  });

  it.each(pages())('in %s lead to files that exist and headings they have', (page) => {
    expect(brokenLinks(page)).toEqual([]);
  });

  it("puts every page of docs/ on the README's documentation map, and each links back to it", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const map = readme.slice(readme.indexOf('\n## Documentation\n'));
    const docs = pages().filter((page) => page.startsWith('docs/'));
    expect(docs.length).toBeGreaterThan(10);
    expect(docs.filter((page) => !map.includes(`](${page})`))).toEqual([]);
    const backTo = (page: string) => relative(dirname(page), 'README.md') + '#documentation';
    expect(docs.filter((page) => !readFileSync(join(ROOT, page), 'utf8').includes(`](${backTo(page)})`))).toEqual([]);
    expect(headingIds(readme)).toContain('documentation');
  });
});
