/**
 * The layers of Sluice, declared once: which module (a top-level folder) may import which.
 * test/layers.test.ts checks the import graph of the source against it (no import a module is
 * not allowed, no circle of files, type-only imports included) and ARCHITECTURE.md's table
 * against it. `bin/`, `test/` and `bench/` sit above everything and may import anything.
 *
 * A module's entry names every module it may import; `only` narrows one to some of its files
 * (a lower layer that needs one error class of a higher one, say).
 */
import { parseSync, type Module } from '@swc/core';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

export interface Allowance {
  module: string;
  /** Only these files of it (paths from the repository's root); none: any file. */
  only?: string[];
}

const any = (...modules: string[]): Allowance[] => modules.map((module) => ({ module }));

/** Lowest first: each may import only modules above it in this list. */
export const LAYERS: Record<string, Allowance[]> = {
  core: [],
  state: any('core'),
  accounts: any('core', 'state'),
  alerts: any('core', 'state'),
  storage: any('core'),
  bus: any('core', 'storage'),
  pipeline: any('core', 'bus', 'storage'),
  delivery: any('core', 'state', 'bus', 'storage'),
  gateway: any('core', 'state', 'accounts', 'pipeline'),
  query: [...any('core', 'storage', 'gateway'), { module: 'pipeline', only: ['pipeline/decompress.ts'] }],
  console: [...any('core', 'state', 'accounts', 'storage', 'gateway'), { module: 'delivery', only: ['delivery/index.ts'] }, { module: 'alerts', only: ['alerts/index.ts'] }],
  relay: [...any('core', 'state', 'accounts', 'storage', 'bus', 'gateway'), { module: 'delivery', only: ['delivery/index.ts'] }, { module: 'alerts', only: ['alerts/index.ts'] }, { module: 'pipeline', only: ['pipeline/bundled-pool.ts'] }],
};

/** Modules above every layer: the composition root and the CLI, the tests, the benchmarks. */
export const ANYTHING_GOES = ['bin', 'test', 'bench'];
/** Tests sit beside what they test, and are above every layer wherever they sit. */
const TEST_FILE = /\.(test|suite)\.tsx?$/;

/** One import of one source file: where it points (a path from the root) and whether only types come. */
export interface ImportEdge {
  from: string;
  to: string;
  typeOnly: boolean;
}

const SOURCE = /\.(ts|tsx|mts|mjs)$/;

function sourceFiles(root: string, dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules' || name.startsWith('.')) return [];
    return statSync(join(root, path)).isDirectory() ? sourceFiles(root, path) : SOURCE.test(name) ? [path] : [];
  });
}

/**
 * Every relative import of the modules' source files: static imports and re-exports (`import
 * type` too), `import('…')` with a literal, and `import('…')` types. Parsed by swc, so comments
 * and strings that look like imports are not taken for them.
 */
export function importGraph(root: string, modules: string[]): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const file of modules.flatMap((module) => sourceFiles(root, module))) {
    const ast = parseSync(readFileSync(join(root, file), 'utf8'), { syntax: file.endsWith('.mjs') ? 'ecmascript' : 'typescript', tsx: file.endsWith('.tsx') });
    for (const { specifier, typeOnly } of importsOf(ast)) {
      if (specifier.startsWith('.')) edges.push({ from: file, to: relative(root, resolve(root, dirname(file), specifier)), typeOnly });
    }
  }
  return edges;
}

function importsOf(ast: Module): Array<{ specifier: string; typeOnly: boolean }> {
  const found: Array<{ specifier: string; typeOnly: boolean }> = [];
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!node || typeof node !== 'object') return;
    const n = node as Record<string, any>;
    if (n.type === 'ImportDeclaration') {
      found.push({ specifier: n.source.value, typeOnly: n.typeOnly || (n.specifiers.length > 0 && n.specifiers.every((s: { isTypeOnly?: boolean }) => s.isTypeOnly)) });
    } else if ((n.type === 'ExportAllDeclaration' || n.type === 'ExportNamedDeclaration') && n.source) {
      found.push({ specifier: n.source.value, typeOnly: Boolean(n.typeOnly) });
    } else if (n.type === 'CallExpression' && n.callee?.type === 'Import' && n.arguments[0]?.expression?.type === 'StringLiteral') {
      found.push({ specifier: n.arguments[0].expression.value, typeOnly: false });
    } else if (n.type === 'TsImportType') {
      found.push({ specifier: n.argument.value, typeOnly: true });
    }
    for (const [key, value] of Object.entries(n)) if (key !== 'span') visit(value);
  };
  visit(ast.body);
  return found;
}

export const moduleOf = (path: string) => path.split('/')[0]!;

/** The imports the layers do not allow, as `from -> to`. */
export function layerViolations(edges: ImportEdge[]): string[] {
  return edges.flatMap(({ from, to }) => {
    const [source, target] = [moduleOf(from), moduleOf(to)];
    if (source === target || ANYTHING_GOES.includes(source) || TEST_FILE.test(from) || target === 'proto') return [];
    const allowance = LAYERS[source]?.find((a) => a.module === target);
    return allowance && (!allowance.only || allowance.only.includes(to)) ? [] : [`${from} -> ${to}`];
  });
}

/** The circles of files (strongly connected components of more than one file), each sorted. */
export function importCircles(edges: ImportEdge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to]);
  // Tarjan's algorithm; recursive, as import chains are a few dozen files deep.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const connect = (file: string): void => {
    index.set(file, counter);
    low.set(file, counter++);
    stack.push(file);
    onStack.add(file);
    for (const target of next.get(file) ?? []) {
      if (!index.has(target)) {
        connect(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1) circles.push(component.sort());
  };
  for (const file of next.keys()) if (!index.has(file)) connect(file);
  return circles;
}
