/**
 * What decompressing one request costs, by decoder: 100-span trace requests (bench/payload.ts)
 * compressed with gzip and with zstd (level 3), decoded one after the other on this thread, in
 * rounds taken in turns. Prints the median CPU microseconds per request of each.
 *
 *   node --import tsx bench/inflate.ts [rounds=5] [requestsPerRound=1000]
 *
 * Node 20 has no zstd of its own: the rows that need it are left out there.
 */
import { gunzipSync } from 'node:zlib';
import * as zlib from 'node:zlib';
import { compress as zstdCompress, decompress as zstdOffThread } from '@mongodb-js/zstd';
import { zstdCheckBounds } from '../pipeline/decompress.ts';
import { Inflater } from '../pipeline/inflate.ts';
import { loadTraceTypes, traceBodies } from './payload.ts';

const rounds = Number(process.argv[2] ?? 5);
const perRound = Number(process.argv[3] ?? 1000);
const CAP = 10 * 1024 * 1024;

const { bodies: gzipped, rawBytes } = traceBodies(loadTraceTypes(), 200, 100);
const zstded = await Promise.all(gzipped.map((body) => zstdCompress(gunzipSync(body), 3)));
const builtinZstd = (zlib as { zstdDecompressSync?: (body: Uint8Array, options: object) => Buffer }).zstdDecompressSync;
const gzipInflater = new Inflater('gzip');
const zstdInflater = new Inflater('zstd');

const decoders: Record<string, ((i: number) => unknown) | undefined> = {
  'gzip: gunzipSync (a zlib stream per request)': (i) => gunzipSync(gzipped[i]!),
  'gzip: the worker\'s reused stream and buffer': (i) => gzipInflater.inflate(gzipped[i]!, CAP),
  'zstd: @mongodb-js/zstd (libuv\'s pool, awaited)': (i) => zstdOffThread(zstded[i]!),
  'zstd: zstdDecompressSync (a decoder per request)': builtinZstd && ((i) => builtinZstd(zstded[i]!, { maxOutputLength: CAP })),
  'zstd: the worker\'s reused decoder and buffer': zstdInflater.native ? (i) => zstdInflater.inflate(zstded[i]!, CAP, zstdCheckBounds(zstded[i]!, CAP)) : undefined,
};

const samples = new Map<string, number[]>();
for (let round = 0; round < rounds; round++) {
  for (const [name, decode] of Object.entries(decoders)) {
    if (!decode) continue;
    const started = process.cpuUsage();
    for (let n = 0; n < perRound; n++) await decode(n % gzipped.length);
    const cpu = process.cpuUsage(started);
    samples.set(name, [...(samples.get(name) ?? []), (cpu.user + cpu.system) / perRound]);
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
console.log(`${process.version}: ${rawBytes} bytes of protobuf per request; gzip ${Math.round(gzipped.reduce((s, b) => s + b.length, 0) / gzipped.length)}, zstd ${Math.round(zstded.reduce((s, b) => s + b.length, 0) / zstded.length)} bytes`);
for (const [name, values] of samples) console.log(`${name.padEnd(50)} ${median(values).toFixed(1).padStart(7)} µs of CPU per request (median of ${values.length} rounds)`);
