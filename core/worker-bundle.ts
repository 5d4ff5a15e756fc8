/**
 * A worker thread's code as one JavaScript file, which esbuild bundles from its TypeScript entry
 * when a pool starts (the pipeline's `worker.ts`, the relay's `render-worker.ts`). Workers that loaded the TypeScript sources through tsx paid for it in every thread: tsx's
 * loader hooks ran on a thread of their own beside each worker and every module went through
 * them: with two workers, `sluice serve` spent 0.9 CPU-seconds more and served 0.6 s later
 * (bench/HISTORY.md, "Worker start-up"). The bundle holds our modules only: the packages they import stay outside it,
 * imported by their absolute URLs (resolved as Node would, from here), and each module's
 * `import.meta.url` is still its source file's, so files beside the sources are found as before.
 *
 * The file is written to a directory of its own under the system's temporary directory
 * (mkdtemp: private to this user), read by each worker thread the pool starts or replaces, and
 * removed with the pool (a process killed with SIGKILL leaves its ~220 KB behind).
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

export interface WorkerBundle {
  /** The bundle's file URL, for piscina's `filename`. */
  url: string;
  remove(): Promise<void>;
}

/** Bundles `entry` (a TypeScript file's path) and writes it to a private temporary directory. */
export async function bundleWorker(entry: string): Promise<WorkerBundle> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: `node${process.versions.node.split('.')[0]}`,
    write: false,
    // Stack traces of a task that failed name the TypeScript sources (as under tsx).
    sourcemap: 'inline',
    sourcesContent: false,
    logLevel: 'silent',
    plugins: [packagesByUrl, ownImportMetaUrl],
  });
  const dir = await mkdtemp(join(tmpdir(), 'sluice-workers-'));
  const path = join(dir, basename(entry).replace(/\.ts$/, '.mjs'));
  try {
    await writeFile(path, result.outputFiles[0]!.contents, { mode: 0o600 });
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return { url: pathToFileURL(path).href, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** Marks resolutions this plugin asked esbuild for itself. */
const RESOLVING = Symbol('resolving');

/** A package import stays an import, of the file Node would load for it, by absolute URL. */
const packagesByUrl: Plugin = {
  name: 'packages-by-url',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, async (args) => {
      if (args.pluginData === RESOLVING || args.path.startsWith('node:')) return undefined;
      const resolved = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: RESOLVING });
      if (resolved.errors.length > 0) return { errors: resolved.errors };
      // Node's built-in modules without the node: prefix come back external and unresolved.
      if (resolved.external) return { path: args.path, external: true };
      return { path: pathToFileURL(resolved.path).href, external: true };
    });
  },
};

/** `import.meta.url` in a bundled module is its source file's URL, not the bundle's. */
const ownImportMetaUrl: Plugin = {
  name: 'own-import-meta-url',
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      return { contents: source.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href)), loader: 'ts' };
    });
  },
};
