/**
 * A ClickHouse HTTP facade over chDB, for process-level cluster tests. The only ClickHouse
 * server package here (Debian's 18.16) is too old for our schema, and chDB binds one data dir
 * per OS process — so one facade process owns the data dir and answers the part of the
 * ClickHouse HTTP interface that @clickhouse/client uses for ClickhouseServerStorage. Several
 * `sluice consume` processes then share one storage through the real server driver
 * (CLICKHOUSE_URL=http://127.0.0.1:<port>).
 *
 * What the client sends (read from @clickhouse/client 1.x, node_base_connection.js):
 *   - ping():         GET /ping                                    → 200 "Ok.\n"
 *   - exec() no data: POST /?query_id=…&<settings>  body = the SQL
 *   - exec() + data:  POST /?query_id=…&<settings>&query=<SQL>  body = the data (INSERT … FORMAT f)
 *   Settings travel as URL parameters (default_format, insert_deduplication_token, …); a
 *   `database` parameter only when the client was given one; query parameters as `param_<name>`
 *   (bound by chDB, see unescapeParam). A non-2xx status or an
 *   X-ClickHouse-Exception-Code header is an error; the body `Code: N. DB::Exception: … (NAME)`
 *   is parsed into a ClickHouseError.
 * INSERT data is written to a temp file and loaded with `INSERT … FROM INFILE … SETTINGS …
 * FORMAT f`, as storage/chdb.ts does (chDB has no raw RowBinary insert). Statements run one at
 * a time: the session is shared, and USE changes it.
 *
 * Test switches (not ClickHouse): POST /__fault?down=1 makes every request (ping included)
 * answer 503 until down=0; hold=1 holds every INSERT's answer, after chDB committed it, until
 * hold=0 (a consumer killed meanwhile has stored rows it never heard about). GET /__state
 * reports the switches and counts, including INSERTs that reused an earlier dedup token.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { createGunzip } from 'node:zlib';
import type { Session } from 'chdb';
import { quoteIdentifier, quoteString } from '../storage/storage.ts';

/**
 * URL parameters that are not settings. (wait_end_of_query: the facade answers once the
 * statement ended anyway.)
 */
const NOT_SETTINGS = new Set(['query', 'query_id', 'database', 'session_id', 'session_timeout', 'session_check', 'user', 'password', 'role', 'wait_end_of_query']);
/** INSERT INTO <table> [(columns)] FORMAT <format>, its data in the request body. */
const INSERT_WITH_DATA = /^\s*(INSERT\s+INTO\s+[\s\S]+?)\s+FORMAT\s+(\w+)\s*;?\s*$/i;

export interface FacadeState {
  down: boolean;
  hold: boolean;
  /** INSERTs chDB committed. */
  inserts: number;
  /** Those still held before their answer: who sent each (its User-Agent: Sluice's names its host and pid) and its statement. */
  heldInserts: Array<{ from: string; statement: string }>;
  /** Requests answered 503 by the down switch. */
  refused: number;
  /** INSERTs whose insert_deduplication_token an earlier INSERT had used (a batch sent again). */
  repeatedTokens: number;
}

class FacadeError extends Error {
  constructor(readonly code: number, type: string, message: string) {
    super(`Code: ${code}. DB::Exception: ${message}. (${type})`);
  }
}

/** Serves the facade in this process on 127.0.0.1:port (0: a free port); returns the port. */
export async function serveClickhouseFacade(dataDir: string, port = 0): Promise<{ port: number; close(): Promise<void> }> {
  const engineDir = resolve(dataDir, 'clickhouse');
  const tmpDir = resolve(dataDir, 'tmp');
  await mkdir(engineDir, { recursive: true });
  await rm(tmpDir, { recursive: true, force: true });
  await mkdir(tmpDir, { recursive: true });
  const { Session } = await import('chdb');
  const session: Session = new Session(engineDir);
  const state: FacadeState = { down: false, hold: false, inserts: 0, heldInserts: [], refused: 0, repeatedTokens: 0 };
  const tokens = new Set<string>();
  let currentDb = 'default';
  let queue: Promise<unknown> = Promise.resolve();
  let fileSeq = 0;
  let release: () => void = () => {};
  let released = Promise.resolve();

  /** Runs one statement after every earlier one (USE first when the request names a database), its parameters bound by chDB. */
  const run = (sql: string, format: string, database: string, bound: Record<string, string> = {}) => {
    const next = queue.then(async () => {
      if (database !== currentDb) {
        await session.queryAsync(`USE ${quoteIdentifier(database)}`);
        currentDb = database;
      }
      return Object.keys(bound).length > 0 ? session.queryBindAsync(sql, bound, { format }) : session.queryAsync(sql, { format });
    });
    queue = next.catch(() => undefined);
    return next;
  };

  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://facade');
    if (url.pathname === '/__fault' && req.method === 'POST') {
      const down = url.searchParams.get('down');
      const hold = url.searchParams.get('hold');
      if (down !== null) state.down = down === '1';
      if (hold === '1' && !state.hold) released = new Promise((resolve) => (release = resolve));
      if (hold === '0') release();
      if (hold !== null) state.hold = hold === '1';
      return json(res, state);
    }
    if (url.pathname === '/__state') return json(res, state);
    if (state.down) {
      state.refused++;
      req.resume();
      res.writeHead(503, { 'content-type': 'text/plain' }).end('facade: storage switched off by the test\n');
      return;
    }
    if (url.pathname === '/ping' && (req.method === 'GET' || req.method === 'HEAD')) {
      res.writeHead(200, { 'content-type': 'text/plain; charset=UTF-8' }).end(req.method === 'HEAD' ? undefined : 'Ok.\n');
      return;
    }
    if (url.pathname !== '/' || (req.method !== 'POST' && req.method !== 'GET')) {
      req.resume();
      throw new FacadeError(48, 'NOT_IMPLEMENTED', `the facade does not serve ${req.method} ${url.pathname}`);
    }
    const params = url.searchParams;
    const database = params.get('database') ?? 'default';
    const format = params.get('default_format') ?? 'TabSeparated';
    const settings = [...params].filter(([name]) => !NOT_SETTINGS.has(name) && !name.startsWith('param_') && name !== 'default_format');
    if (params.has('session_id')) {
      req.resume();
      throw new FacadeError(48, 'NOT_IMPLEMENTED', 'the facade has no sessions');
    }
    const bound = Object.fromEntries([...params].filter(([name]) => name.startsWith('param_')).map(([name, value]) => [name.slice(6), unescapeParam(value)]));
    const body = bodyStream(req);
    const queryParam = params.get('query');
    const insert = queryParam === null ? null : INSERT_WITH_DATA.exec(queryParam);
    const headers = { 'x-clickhouse-query-id': params.get('query_id') ?? randomUUID(), 'x-clickhouse-format': format };

    if (insert) {
      // The data streams to a file; chDB loads it with the settings in the statement.
      const file = join(tmpDir, `insert-${++fileSeq}.bin`);
      try {
        await pipeline(body, createWriteStream(file, { mode: 0o600 }));
        const clause = settings.length === 0 ? '' : ` SETTINGS ${settings.map(([name, value]) => `${settingName(name)} = ${quoteString(value)}`).join(', ')}`;
        await run(`${insert[1]} FROM INFILE ${quoteString(file)}${clause} FORMAT ${insert[2]}`, format, database);
      } finally {
        await rm(file, { force: true });
      }
      state.inserts++;
      const token = params.get('insert_deduplication_token');
      if (token !== null && tokens.has(token)) state.repeatedTokens++;
      if (token !== null) tokens.add(token);
      if (state.hold) {
        const held = { from: req.headers['user-agent'] ?? '', statement: insert[1]! };
        state.heldInserts.push(held);
        await released;
        state.heldInserts.splice(state.heldInserts.indexOf(held), 1);
      }
      res.writeHead(200, { ...headers, 'content-type': 'text/plain; charset=UTF-8' }).end();
      return;
    }

    const text = (await readAll(body)).toString('utf8');
    const sql = queryParam === null ? text : text ? `${queryParam}\n${text}` : queryParam;
    // Other settings would need a SETTINGS clause in the right place of any statement: refused
    // rather than silently ignored (our driver sends none).
    if (settings.length > 0) throw new FacadeError(115, 'UNKNOWN_SETTING', `the facade passes settings on INSERT … FORMAT only, not ${settings.map(([n]) => n).join(', ')}`);
    const result = await run(sql, format, database, bound);
    const summary = { read_rows: String(result.rowsRead), read_bytes: String(result.bytesRead), elapsed_ns: String(Math.round(result.elapsed * 1e9)) };
    res.writeHead(200, { ...headers, 'content-type': 'text/plain; charset=UTF-8', 'x-clickhouse-summary': JSON.stringify(summary) });
    res.end(Buffer.from(result.bytes()));
  };

  const server = createServer((req, res) => {
    answer(req, res).catch((err: unknown) => {
      const { code, text } = exceptionOf(err);
      if (res.headersSent) return void res.destroy();
      res.writeHead(500, { 'content-type': 'text/plain; charset=UTF-8', 'x-clickhouse-exception-code': String(code) });
      res.end(`${text} (version facade over chDB)\n`);
    });
  });
  await new Promise<void>((ready) => server.listen(port, '127.0.0.1', ready));
  return {
    port: (server.address() as { port: number }).port,
    async close() {
      release();
      const closed = new Promise<void>((done) => server.close(() => done()));
      server.closeAllConnections();
      await closed;
      await queue;
      session.close();
    },
  };
}

/**
 * A `param_` value as ClickHouse reads it: escaped text (`\\t`, `\\'`, `\\\\`..., as
 * @clickhouse/client writes it), turned back into the value, which chDB's binder escapes again.
 */
function unescapeParam(value: string): string {
  const escapes: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', 0: '\0' };
  return value.replace(/\\([\s\S])/g, (_, c: string) => escapes[c] ?? c);
}

function settingName(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new FacadeError(115, 'UNKNOWN_SETTING', `bad setting name ${name}`);
  return name;
}

function bodyStream(req: IncomingMessage): Readable {
  const encoding = req.headers['content-encoding'];
  if (!encoding) return req;
  if (encoding === 'gzip') return req.pipe(createGunzip());
  req.resume();
  throw new FacadeError(48, 'NOT_IMPLEMENTED', `the facade does not take Content-Encoding ${encoding}`);
}

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

/** chDB throws "Code: N. DB::Exception: … (NAME)" with clickhouseCode; anything else is wrapped. */
function exceptionOf(err: unknown): { code: number; text: string } {
  const message = err instanceof Error ? err.message : String(err);
  const code = Number((err as { clickhouseCode?: unknown }).clickhouseCode ?? (err as { code?: unknown }).code);
  if (/^Code: \d+\. DB::Exception: /.test(message)) return { code: Number.isInteger(code) ? code : Number(/^Code: (\d+)/.exec(message)![1]), text: message };
  return { code: 1001, text: `Code: 1001. DB::Exception: ${message}. (STD_EXCEPTION)` };
}

function json(res: ServerResponse, value: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value));
}

// --- The parent's side: the facade as a child process -------------------------------------

export interface ClickhouseFacade {
  /** CLICKHOUSE_URL for Sluice. */
  url: string;
  port: number;
  process: ChildProcess;
  /** Rows of a statement run through the facade (JSONEachRow). */
  rows<T = Record<string, unknown>>(sql: string): Promise<T[]>;
  /** down: every request answers 503; hold: INSERT answers held after the commit until released. */
  fault(switches: { down?: boolean; hold?: boolean }): Promise<FacadeState>;
  state(): Promise<FacadeState>;
  /** Stops the process (SIGTERM, then SIGKILL) and removes its data dir. */
  stop(): Promise<void>;
}

const MAIN = fileURLToPath(new URL('./clickhouse-facade-main.ts', import.meta.url));
const REPO = fileURLToPath(new URL('..', import.meta.url));

/** Starts a facade process on a free port with a fresh data dir. */
export async function startClickhouseFacade(): Promise<ClickhouseFacade> {
  const dataDir = await mkdtemp(join(tmpdir(), 'sluice-facade-'));
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, dataDir], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const port = await new Promise<number>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`the ClickHouse facade did not start in 30 s: ${stderr}`)), 30_000);
    child.once('exit', (code) => fail(new Error(`the ClickHouse facade exited (${code}) before it listened: ${stderr}`)));
    createInterface({ input: child.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      ready(Number(JSON.parse(line).port));
    });
  });
  const base = `http://127.0.0.1:${port}`;
  const control = async (path: string, init?: RequestInit) => (await fetch(base + path, init)).json() as Promise<FacadeState>;
  return {
    url: base,
    port,
    process: child,
    async rows<T>(sql: string): Promise<T[]> {
      const response = await fetch(`${base}/?default_format=JSONEachRow`, { method: 'POST', body: sql });
      const text = await response.text();
      if (response.status !== 200) throw new Error(`facade query failed (${response.status}): ${text}`);
      return text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as T);
    },
    fault({ down, hold }) {
      const params = new URLSearchParams();
      if (down !== undefined) params.set('down', down ? '1' : '0');
      if (hold !== undefined) params.set('hold', hold ? '1' : '0');
      return control(`/__fault?${params}`, { method: 'POST' });
    },
    state: () => control('/__state'),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((done) => child.once('exit', done));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
