/**
 * ChdbReader: read connections to the embedded engine, for the query endpoint (query/). chDB
 * gives every Session on one data dir a context of its own over the one engine (current
 * database, session settings) and the same tables: a `USE` here never touches the writer's
 * session (ChdbStorage), and rows it inserted are visible at once.
 *
 * A connection runs one statement at a time (chDB runs a connection's statements one after
 * another anyway; statements run side by side on connections of their own), with the database
 * it was opened on as its current database. A connection whose statement failed is closed, not
 * reused: chDB 3.4 hands the output a failed statement had written so far to the next
 * statement of the same connection, in front of that statement's own output (tried here: a
 * JSON result cut by max_result_rows came back ahead of the next `SELECT 42`). Reused, it
 * would leak one client's rows into another's answer, and text a client chose into the
 * endpoint's own statements.
 *
 * Only databases that exist get connections, and only an operator can create databases.
 */
import type { Session } from 'chdb';
import { openChdbSession } from './chdb-session.ts';
import { quoteIdentifier } from './storage.ts';

export interface StatementOutput {
  bytes: Uint8Array;
  rowsRead: number;
  bytesRead: number;
  elapsedSeconds: number;
  /** The worker_threads thread id that ran the statement (0: the main thread), where the driver runs statements on threads. */
  threadId?: number;
}

export interface StatementOptions {
  /** Output format when the statement has no FORMAT clause. */
  format: string;
  /**
   * Values of the statement's {name:Type} placeholders, bound by the engine. Each driver escapes
   * them for its transport (chDB's binder, @clickhouse/client's query_params), so a value is
   * passed as it is: `it's` or `a\b` arrive as those bytes. (The query endpoint refuses values
   * with backslash escapes, the one case where ClickHouse's text form and the value differ.)
   */
  params?: Readonly<Record<string, string>>;
}

/** Runs one statement with `database` as the current database. */
export interface StatementRunner {
  run(database: string, sql: string, options: StatementOptions): Promise<StatementOutput>;
}

/** Idle connections kept per database; more are closed when their statement ends. */
const IDLE_PER_DATABASE = 4;

export class ChdbReader implements StatementRunner {
  private readonly idle = new Map<string, Session[]>();
  private closed = false;

  /** `engineDir`: chDB's directory in the data dir (chdbEngineDir); `engineArgs`: the engine's settings (storage/chdb-engine.ts). */
  constructor(private readonly engineDir: string, private readonly engineArgs: readonly string[] = []) {}

  async run(database: string, sql: string, { format, params }: StatementOptions): Promise<StatementOutput> {
    const session = this.idle.get(database)?.pop() ?? await this.open(database);
    let reusable = false;
    try {
      const result = params && Object.keys(params).length > 0
        ? await session.queryBindAsync(sql, params, { format })
        : await session.queryAsync(sql, { format });
      reusable = true;
      return { bytes: result.bytes(), rowsRead: result.rowsRead, bytesRead: result.bytesRead, elapsedSeconds: result.elapsed };
    } finally {
      this.release(database, session, reusable);
    }
  }

  /** Closes the idle connections now, the others when their statement ends (chDB defers closing a busy one). */
  async shutdown(): Promise<void> {
    this.closed = true;
    for (const sessions of this.idle.values()) for (const session of sessions) session.close();
    this.idle.clear();
  }

  private release(database: string, session: Session, reusable: boolean): void {
    const idle = this.idle.get(database) ?? [];
    if (!reusable || this.closed || idle.length >= IDLE_PER_DATABASE) {
      session.close();
      return;
    }
    idle.push(session);
    this.idle.set(database, idle);
  }

  private async open(database: string): Promise<Session> {
    const session = await openChdbSession(this.engineDir, this.engineArgs);
    try {
      // A database that does not exist fails here (UNKNOWN_DATABASE) and gets no connection.
      await session.queryAsync(`USE ${quoteIdentifier(database)}`);
      return session;
    } catch (err) {
      session.close();
      throw err;
    }
  }
}
