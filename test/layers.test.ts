/**
 * The layers test/layers.ts declares hold in the source: no module imports one it may not, no
 * circle of files imports itself (type-only imports count: a circle of types is a circle of
 * meaning), and ARCHITECTURE.md's table says what the declaration says.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ANYTHING_GOES, importCircles, importGraph, LAYERS, layerViolations } from './layers.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const LAYERED = Object.keys(LAYERS);
const edges = importGraph(ROOT, [...LAYERED, ...ANYTHING_GOES]);

describe('the layers', () => {
  it('are kept: no module imports a module, or a file of one, its layer does not allow', () => {
    expect(edges.length).toBeGreaterThan(1000);
    expect(layerViolations(edges)).toEqual([]);
  });

  it('have no circle of files, type-only imports included', () => {
    expect(importCircles(edges)).toEqual([]);
  });

  it('form no circle of modules either: each may import only modules declared before it', () => {
    const order = LAYERED;
    const backwards = LAYERED.flatMap((module, i) => LAYERS[module]!.filter(({ module: target }) => order.indexOf(target) >= i).map(({ module: target }) => `${module} -> ${target}`));
    expect(backwards).toEqual([]);
  });

  it('are what ARCHITECTURE.md says each module may import', () => {
    const table = readFileSync(`${ROOT}ARCHITECTURE.md`, 'utf8');
    const documented: Record<string, string[]> = {};
    for (const row of table.matchAll(/^\| `(\w+)\/` \|.*\| ([^|]+) \|$/gm)) {
      const [, module, mayImport] = row;
      // proto/ holds .proto files read at run time, not modules: no layer.
      documented[module!] = [...new Set([...mayImport!.matchAll(/`(\w+)\//g)].map(([, target]) => target!))].filter((target) => target !== 'proto').sort();
    }
    const declared = Object.fromEntries(LAYERED.map((module) => [module, LAYERS[module]!.map(({ module: target }) => target).sort()]));
    expect(Object.fromEntries(LAYERED.map((module) => [module, documented[module]]))).toEqual(declared);
  });

  it('catch what they are for: an import up a layer, a file outside `only`, a circle', () => {
    const edge = (from: string, to: string) => ({ from, to, typeOnly: true });
    expect(layerViolations([edge('storage/sink.ts', 'bus/bus.ts'), edge('query/http.ts', 'pipeline/ingest.ts'), edge('query/http.ts', 'pipeline/decompress.ts'), edge('bin/app.ts', 'relay/index.ts')]))
      .toEqual(['storage/sink.ts -> bus/bus.ts', 'query/http.ts -> pipeline/ingest.ts']);
    expect(importCircles([edge('a.ts', 'b.ts'), edge('b.ts', 'c.ts'), edge('c.ts', 'a.ts'), edge('c.ts', 'd.ts')])).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  });
});
