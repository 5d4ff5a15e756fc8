/**
 * ChdbReader: read connections to the embedded engine, for the query endpoint (query/). chDB
 * gives every Session on one data dir a context of its own over the one engine (current
 * database, session settings) and the same tables: a `USE` here never touches the writer's
 * session (ChdbStorage), and rows it inserted are visible at once.
 *
 * One connection per database a client names (its `USE` run once), so concurrent queries on
 * different databases never share a current database. Only databases that exist get one, and
 * only an operator can create databases: the set stays small.
 */
import type { Session } from 'chdb';
import { chdbEngineDir } from './chdb.ts';
import { quoteIdentifier } from './storage.ts';

export interface StatementOutput {
  bytes: Uint8Array;
  rowsRead: number;
  bytesRead: number;
  elapsedSeconds: number;
}

export interface StatementOptions {
  /** Output format when the statement has no FORMAT clause. */
  format: string;
  /** Values of the statement's {name:Type} placeholders, in ClickHouse's text form; bound by the engine. */
  params?: Readonly<Record<string, string>>;
}

/** Runs one statement with `database` as the current database. */
export interface StatementRunner {
  run(database: string, sql: string, options: StatementOptions): Promise<StatementOutput>;
}

export class ChdbReader implements StatementRunner {
  private readonly engineDir: string;
  private readonly sessions = new Map<string, Promise<Session>>();

  constructor(dataDir: string) {
    this.engineDir = chdbEngineDir(dataDir);
  }

  async run(database: string, sql: string, { format, params }: StatementOptions): Promise<StatementOutput> {
    const session = await this.session(database);
    const result = params && Object.keys(params).length > 0
      ? await session.queryBindAsync(sql, params, { format })
      : await session.queryAsync(sql, { format });
    return { bytes: result.bytes(), rowsRead: result.rowsRead, bytesRead: result.bytesRead, elapsedSeconds: result.elapsed };
  }

  /** Closes every connection (chDB defers the close of one with a query still running). */
  async shutdown(): Promise<void> {
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    for (const session of await Promise.allSettled(sessions)) {
      if (session.status === 'fulfilled') session.value.close();
    }
  }

  private session(database: string): Promise<Session> {
    let session = this.sessions.get(database);
    if (!session) {
      session = this.open(database);
      this.sessions.set(database, session);
      // A database that does not exist (UNKNOWN_DATABASE) gets no connection.
      session.catch(() => this.sessions.delete(database));
    }
    return session;
  }

  private async open(database: string): Promise<Session> {
    const { Session } = await import('chdb');
    const session = new Session(this.engineDir);
    try {
      await session.queryAsync(`USE ${quoteIdentifier(database)}`);
      return session;
    } catch (err) {
      session.close();
      throw err;
    }
  }
}
