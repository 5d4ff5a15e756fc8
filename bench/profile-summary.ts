/**
 * Summarises V8 CPU profiles (.cpuprofile, written by `node --cpu-prof`): where the time went by
 * category — garbage collection, (program) (V8 and native code with no JS frame on top: the
 * engine's own work, chDB and zlib called synchronously, the libuv loop), idle, Node's own
 * JavaScript, each npm package, Sluice's code by folder — and the functions with the most self
 * time. One summary per file (a process's main thread and each worker thread write their own).
 *
 * usage: node --import tsx bench/profile-summary.ts <file.cpuprofile | dir>... [--top 25]
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

/** The part of the .cpuprofile format (Chrome DevTools Profiler.Profile) we read. */
interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number } }>;
  startTime: number;
  endTime: number;
  /** Node id of each sample, and the µs since the previous sample. */
  samples: number[];
  timeDeltas: number[];
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const WAITING = '(waiting: piscina Atomics.wait)';

/** What a frame belongs to: a V8 pseudo-frame, node:*, an npm package, or a folder of ours. */
function categoryOf(functionName: string, url: string): string {
  if (functionName === '(garbage collector)') return 'GC';
  if (functionName === '(program)') return '(program)';
  if (functionName === '(idle)') return '(idle)';
  // A piscina worker blocked in Atomics.wait for its next task is sampled as if it ran: it waits.
  if (functionName === 'atomicsWaitLoop' && url.includes('/piscina/')) return WAITING;
  if (functionName === '(root)') return '(root)';
  if (url.startsWith('node:') || (!url.includes('/') && url !== '')) return 'node internals';
  if (url === '') return 'native / builtins';
  if (url.startsWith('wasm:')) return 'wasm';
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  const inModules = path.lastIndexOf('/node_modules/');
  if (inModules >= 0) {
    const [scope, name] = path.slice(inModules + '/node_modules/'.length).split('/');
    return `npm ${scope!.startsWith('@') ? `${scope}/${name}` : scope}`;
  }
  const ours = relative(ROOT, path);
  return ours.startsWith('..') ? path : `sluice ${ours.split('/')[0]}/`;
}

function where(url: string, line: number): string {
  if (!url) return '';
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  const short = path.includes('/node_modules/') ? path.slice(path.lastIndexOf('/node_modules/') + 1) : relative(ROOT, path).startsWith('..') ? path : relative(ROOT, path);
  // tsx compiles each .ts file to one line: its line numbers say nothing.
  return short.endsWith('.ts') ? short : `${short}:${line + 1}`;
}

const ms = (us: number) => (us / 1000).toFixed(0).padStart(8);
const pct = (part: number, whole: number) => `${((100 * part) / whole).toFixed(1).padStart(5)} %`;

function summarise(file: string, top: number): string {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  // Each sample's time delta is the time spent in the node sampled (self time).
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));

  const categories = new Map<string, number>();
  const functions = new Map<string, { us: number; category: string }>();
  let total = 0;
  for (const [id, us] of selfUs) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const category = categoryOf(functionName, url);
    categories.set(category, (categories.get(category) ?? 0) + us);
    const key = `${functionName || '(anonymous)'} ${where(url, lineNumber)}`.trim();
    const f = functions.get(key) ?? { us: 0, category };
    f.us += us;
    functions.set(key, f);
    total += us;
  }
  const idle = (categories.get('(idle)') ?? 0) + (categories.get(WAITING) ?? 0);
  const busy = total - idle;
  const isIdle = (category: string) => category === '(idle)' || category === WAITING;
  const lines = [
    `${file}: ${ms(total).trim()} ms sampled, ${ms(busy).trim()} ms busy (not idle or waiting), ${profile.samples.length} samples`,
    '',
    'by category (share of busy time; idle and waiting: share of all):',
  ];
  // Categories under 0.5 % of busy time are summed in one line.
  const sorted = [...categories].sort((a, b) => b[1] - a[1]);
  const small = sorted.filter(([category, us]) => !isIdle(category) && us < busy / 200);
  for (const [category, us] of sorted.filter((entry) => !small.includes(entry))) {
    lines.push(`  ${ms(us)} ms ${isIdle(category) ? pct(us, total) : pct(us, busy)}  ${category}`);
  }
  const rest = small.reduce((sum, [, us]) => sum + us, 0);
  if (small.length) lines.push(`  ${ms(rest)} ms ${pct(rest, busy)}  ${small.length} more, each under 0.5 %`);
  lines.push('', `top ${top} functions by self time (share of busy time):`);
  const ranked = [...functions].filter(([, f]) => !isIdle(f.category)).sort((a, b) => b[1].us - a[1].us).slice(0, top);
  for (const [key, f] of ranked) lines.push(`  ${ms(f.us)} ms ${pct(f.us, busy)}  ${key}  [${f.category}]`);
  return lines.join('\n');
}

/** The .cpuprofile files named, a directory standing for every one in it. */
function profiles(paths: string[]): string[] {
  return paths.flatMap((path) =>
    statSync(path).isDirectory()
      ? readdirSync(path).filter((name) => name.endsWith('.cpuprofile')).sort().map((name) => join(path, name))
      : [path],
  );
}

const { values, positionals } = parseArgs({ options: { top: { type: 'string', default: '25' } }, allowPositionals: true, strict: true });
if (positionals.length === 0) {
  process.stderr.write('usage: profile-summary.ts <file.cpuprofile | dir>... [--top 25]\n');
  process.exit(2);
}
process.stdout.write(profiles(positionals).map((file) => summarise(file, Number(values.top))).join('\n\n') + '\n');
