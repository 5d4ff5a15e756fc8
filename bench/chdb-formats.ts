/**
 * What chDB's insert costs by input format, on the real schema: the same trace rows (the
 * bench's 100-span requests, transcoded) as RowBinary (what Sluice sends) read with the table's
 * types and read with LowCardinality columns as plain strings (how Sluice inserts), as ClickHouse Native
 * in one block (the table's own types), as Native in one block with every LowCardinality column
 * declared as its plain type (what a transcoder could write without dictionaries: ClickHouse
 * converts on insert), and as Native in one block per request (100 rows). Each is inserted into
 * a Null table (parsing alone) and into `otel_traces` (parsing, sorting, writing the part), in
 * turns, each from empty tables, and the process's CPU per million spans is printed (chDB's
 * threads included, with the merges of the figure's own parts that ran meanwhile). Two more
 * Native blocks are made in JavaScript by bench/native-block.ts (the RowBinary transposed; the
 * requests' own blocks joined column by column), timed, checked to hold the RowBinary's rows, and
 * inserted like the others. Measures a lead (bench/README.md,
 * *chDB by input format*); not a path of Sluice's.
 *
 *   node --import tsx bench/chdb-formats.ts [--spans 30000] [--inserts 10] [--turns 2]
 */
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { transcodeOtlp } from '../pipeline/otlp/index.ts';
import { ChdbStorage, inputType } from '../storage/chdb.ts';
import { queryRows, quoteIdentifier, quoteString } from '../storage/storage.ts';
import { joinNativeBlocks, nativeBlock } from './native-block.ts';
import { loadTraceTypes, traceBodies } from './payload.ts';

const { values } = parseArgs({
  options: {
    spans: { type: 'string', default: '30000' },
    inserts: { type: 'string', default: '10' },
    turns: { type: 'string', default: '2' },
  },
});
const spansPerInsert = Number(values.spans);
const inserts = Number(values.inserts);

const cpuSeconds = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

const { bodies } = traceBodies(loadTraceTypes(), 64, 100);
const requests = bodies.map((body) => transcodeOtlp('traces', 'protobuf', gunzipSync(body), 'bench').tables[0]!);
const dir = await mkdtemp(join(tmpdir(), 'sluice-chdb-formats-'));
const storage = new ChdbStorage(dir, 'otel');
try {
  await storage.start();
  const columns = requests[0]!.columns;
  const columnList = columns.map(quoteIdentifier).join(', ');
  const batch: Uint8Array[] = [];
  for (let spans = 0; spans < spansPerInsert; spans += requests[0]!.rows) batch.push(requests[batch.length % requests.length]!.data);
  const spans = batch.length * requests[0]!.rows;

  // The other formats are made by chDB from the same rows: one block, and one block per request.
  const rowBinary = join(dir, 'batch.rowbinary');
  await writeFile(rowBinary, Buffer.concat(batch));
  await storage.query('CREATE TABLE otel.parse_only AS otel.otel_traces ENGINE = Null');
  await storage.query('CREATE TABLE otel.one_block AS otel.otel_traces ENGINE = Memory');
  await storage.query(`INSERT INTO otel.one_block (${columnList}) FROM INFILE ${quoteString(rowBinary)} FORMAT RowBinary`);
  await storage.query('CREATE TABLE otel.per_request AS otel.otel_traces ENGINE = Memory');
  await storage.query('CREATE TABLE otel.one_request AS otel.otel_traces ENGINE = Memory');
  const types = new Map((await queryRows<{ name: string; type: string }>(storage, "SELECT name, type FROM system.columns WHERE database = 'otel' AND table = 'otel_traces'")).map((c) => [c.name, c.type]));
  const plainList = columns
    .map((name) => {
      const plain = inputType(types.get(name)!);
      return plain === types.get(name) ? quoteIdentifier(name) : `CAST(${quoteIdentifier(name)} AS ${plain}) AS ${quoteIdentifier(name)}`;
    })
    .join(', ');
  // Each request also as a Native block of its own, plain types: what a transcoder writing by column would give.
  const requestBlocks: Buffer[] = [];
  for (const [i, data] of batch.entries()) {
    const file = join(dir, `request-${i}`);
    await writeFile(`${file}.rowbinary`, data);
    await storage.query(`INSERT INTO otel.per_request (${columnList}) FROM INFILE ${quoteString(`${file}.rowbinary`)} FORMAT RowBinary`);
    await storage.query('TRUNCATE TABLE otel.one_request');
    await storage.query(`INSERT INTO otel.one_request (${columnList}) FROM INFILE ${quoteString(`${file}.rowbinary`)} FORMAT RowBinary`);
    await storage.query(`SELECT ${plainList} FROM otel.one_request INTO OUTFILE ${quoteString(`${file}.native`)} FORMAT Native`);
    requestBlocks.push(await readFile(`${file}.native`));
  }
  const mergeTrees = (await queryRows<{ name: string }>(storage, "SELECT name FROM system.tables WHERE database = 'otel' AND engine LIKE '%MergeTree'")).map((t) => t.name);
  const native = async (file: string, select: string, from: string) => {
    await storage.query(`SELECT ${select} FROM otel.${from} INTO OUTFILE ${quoteString(join(dir, file))} FORMAT Native SETTINGS max_block_size = 1000000, preferred_block_size_bytes = 0`);
    return join(dir, file);
  };
  // The block a batch builder would make, joined in JavaScript two ways; it must hold exactly the RowBinary's rows.
  const digest = async (file: string, format: string) => {
    await storage.query('CREATE OR REPLACE TABLE otel.check AS otel.otel_traces ENGINE = Memory');
    await storage.query(`INSERT INTO otel.check (${columnList}) FROM INFILE ${quoteString(file)} FORMAT ${format}`);
    return JSON.stringify((await queryRows(storage, `SELECT count() AS rows, sum(cityHash64(toString(tuple(${columnList})))) AS digest FROM otel.check`))[0]);
  };
  const expected = await digest(rowBinary, 'RowBinary');
  const joinCosts: string[] = [];
  const joinedInJavaScript = async (name: string, make: () => Buffer) => {
    let block = make();
    const started = cpuSeconds();
    for (let i = 0; i < inserts; i++) block = make();
    const cost = ((cpuSeconds() - started) / (inserts * spans)) * 1e6;
    const file = `${rowBinary}.${joinCosts.length}.native`;
    await writeFile(file, block);
    const got = await digest(file, 'Native');
    if (got !== expected) throw new Error(`${name}: not the RowBinary's rows: ${got} against ${expected}`);
    joinCosts.push(`${name}: ${cost.toFixed(2)} CPU-s / M spans in JavaScript (same rows: checked)`);
    return file;
  };
  const columnTypes = columns.map((name) => types.get(name)!);
  const transposed = await joinedInJavaScript('RowBinary transposed into one Native block', () => nativeBlock(batch, columns, columnTypes));
  const concatenated = await joinedInJavaScript("requests' Native blocks joined column by column", () => joinNativeBlocks(requestBlocks));

  // How Sluice inserts since 8c02215 (storage/chdb.ts): the RowBinary read by file() with plain types.
  const plainStructure = columns.map((name) => `${quoteIdentifier(name)} ${inputType(types.get(name)!)}`).join(', ');
  const inputs: Array<{ name: string; file: string; format: string; readAsPlain?: boolean }> = [
    { name: 'RowBinary, table types', file: rowBinary, format: 'RowBinary' },
    { name: 'RowBinary, plain types (Sluice)', file: rowBinary, format: 'RowBinary', readAsPlain: true },
    { name: 'Native, transposed in JavaScript', file: transposed, format: 'Native' },
    { name: 'Native, joined column by column', file: concatenated, format: 'Native' },
    { name: 'Native, one block', file: await native('one.native', columnList, 'one_block'), format: 'Native' },
    { name: 'Native, one block, plain types', file: await native('plain.native', plainList, 'one_block'), format: 'Native' },
    { name: 'Native, a block per request', file: await native('per-request.native', columnList, 'per_request'), format: 'Native' },
  ];
  console.log(`chdb-formats: ${inserts} inserts of ${spans.toLocaleString('en-US')} spans per figure; CPU-s / M spans`);
  for (const input of inputs) console.log(`  ${input.name.padEnd(32)} ${(await stat(input.file)).size.toLocaleString('en-US').padStart(12)} bytes`);
  for (const cost of joinCosts) console.log(`  ${cost}`);
  for (let turn = 0; turn < Number(values.turns); turn++) {
    for (const table of ['parse_only', 'otel_traces']) {
      for (const input of inputs) {
        // Each figure starts from empty tables: no merges of earlier figures' parts land in it.
        for (const name of mergeTrees) await storage.query(`TRUNCATE TABLE otel.${quoteIdentifier(name)}`);
        const started = cpuSeconds();
        for (let i = 0; i < inserts; i++) {
          const token = `SETTINGS insert_deduplication_token = ${quoteString(`${turn}:${input.name}:${i}`)}`;
          await storage.query(
            input.readAsPlain
              ? `INSERT INTO otel.${table} (${columnList}) ${token} SELECT * FROM file(${quoteString(input.file)}, 'RowBinary', ${quoteString(plainStructure)})`
              : `INSERT INTO otel.${table} (${columnList}) FROM INFILE ${quoteString(input.file)} ${token} FORMAT ${input.format}`,
          );
        }
        console.log(`  ${table.padEnd(12)} ${input.name.padEnd(32)} ${(((cpuSeconds() - started) / (inserts * spans)) * 1e6).toFixed(2).padStart(6)}`);
      }
    }
  }
} finally {
  await storage.shutdown();
  await rm(dir, { recursive: true, force: true });
}
