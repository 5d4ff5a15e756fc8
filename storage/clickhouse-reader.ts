/**
 * ClickhouseReader: a StatementRunner on a ClickHouse server, through @clickhouse/client — what
 * ChdbReader is to the embedded engine, for the console's queries (console/queries/) in a
 * cluster. Parameters go as query_params (`param_<name>` in the URL, escaped by the client; the
 * server binds them), the output format as the default_format setting, and the statement
 * carries its own SETTINGS clause (readonly, limits).
 *
 * wait_end_of_query = 1: the server buffers the answer until the statement ended, so a statement
 * that fails halfway (a limit reached while rows were being sent) answers an error status, not
 * a 200 with an exception after the first rows; and the summary header has the final counts.
 *
 * Errors: ClickHouse's exceptions are thrown as the client gives them (storage/errors.ts reads
 * them, old servers' text included), like chDB's; no answer at all is `unavailable`.
 *
 * Server versions: query parameters ({name:Type}) need ClickHouse 19.15 or later, and Sluice's
 * schema (Map, DateTime64, codecs) 21.x or later. The server package on the development machine
 * is 18.16: its test (clickhouse-reader.test.ts) covers what 18.16 does (formats, databases,
 * settings in the statement, errors) and that it refuses parameters; the console's queries
 * themselves are tested on chDB.
 */
import { ClickHouseLogLevel, createClient, type ClickHouseClient, type DataFormat } from '@clickhouse/client';
import { SluiceError } from '../core/errors.ts';
import { redactUrl } from '../core/redact.ts';
import type { StatementOptions, StatementOutput, StatementRunner } from './chdb-reader.ts';
import { clickhouseException } from './errors.ts';

export interface ClickhouseReaderOptions {
  /** Server URL with credentials, `http(s)://user:password@host:8123`; a read-only user is best. Required. */
  url: string;
  /** Timeout of one request in ms; keep it above the statements' max_execution_time. Default 60000. */
  requestTimeoutMs?: number;
  /** Most HTTP connections open at once, per database. Default 10. */
  maxOpenConnections?: number;
}

export class ClickhouseReader implements StatementRunner {
  /** The URL without its password, for messages. */
  readonly safeUrl: string;
  /** One client per database: the client sets the current database per client, not per request. */
  private readonly clients = new Map<string, ClickHouseClient>();
  private closed = false;

  constructor(private readonly options: ClickhouseReaderOptions) {
    // Not echoed: a malformed URL may still contain the password.
    if (!URL.canParse(options.url)) throw new Error('the ClickHouse URL is not a valid URL');
    this.safeUrl = redactUrl(options.url);
  }

  async run(database: string, sql: string, { format, params }: StatementOptions): Promise<StatementOutput> {
    const client = this.client(database);
    try {
      const result = await client.exec({
        query: sql,
        query_params: params,
        clickhouse_settings: { default_format: format as DataFormat, wait_end_of_query: 1 },
      });
      const parts: Buffer[] = [];
      for await (const part of result.stream) parts.push(part as Buffer);
      const summary = result.summary;
      return {
        bytes: Buffer.concat(parts),
        rowsRead: Number(summary?.read_rows ?? 0),
        bytesRead: Number(summary?.read_bytes ?? 0),
        // elapsed_ns is in the summary from ClickHouse 22.x on; 0 before.
        elapsedSeconds: Number((summary as { elapsed_ns?: string } | undefined)?.elapsed_ns ?? 0) / 1e9,
      };
    } catch (err) {
      if (clickhouseException(err)) throw err;
      const reason = err instanceof Error ? err.message : String(err);
      throw new SluiceError('unavailable', `ClickHouse at ${this.safeUrl} is unavailable: ${reason}`, { cause: err });
    }
  }

  async shutdown(): Promise<void> {
    this.closed = true;
    const clients = [...this.clients.values()];
    this.clients.clear();
    await Promise.all(clients.map((client) => client.close()));
  }

  private client(database: string): ClickHouseClient {
    if (this.closed) throw new SluiceError('unavailable', 'the ClickHouse reader is shut down');
    let client = this.clients.get(database);
    if (!client) {
      client = createClient({
        url: this.options.url,
        database,
        request_timeout: this.options.requestTimeoutMs ?? 60_000,
        max_open_connections: this.options.maxOpenConnections ?? 10,
        application: 'sluice-console',
        // Every failure is thrown to the caller, which answers it.
        log: { level: ClickHouseLogLevel.OFF },
      });
      this.clients.set(database, client);
    }
    return client;
  }
}
