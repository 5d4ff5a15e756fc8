/**
 * What the query endpoint shows a client: the telemetry tables of the telemetry database
 * (storage/schema.ts#TELEMETRY_TABLES), and of the system database only the tables Grafana's
 * ClickHouse data source reads (its schema browser and SQL editor: SHOW DATABASES, SHOW TABLES,
 * DESC TABLE, system.columns, system.functions) and the number generators. Everything else is
 * refused by name (statement.ts asks `allowsTable`): the relay's tables, the system tables that
 * tell about the server (system.processes shows other clients' statements, system.disks and
 * system.stack_trace its paths and code), information_schema, and in chDB's `default` database
 * any file of the process by its path (`default.\`/etc/passwd\``).
 *
 * system.databases, system.tables and system.columns list every database and table; every
 * statement runs with an `additional_table_filters` setting (request.ts) that keeps their rows
 * to the telemetry tables, so SHOW DATABASES and SHOW TABLES (which read them) do too.
 */
import { TELEMETRY_TABLES } from '../storage/schema.ts';
import { quoteString } from '../storage/storage.ts';

/** System tables a client may read (the listings filtered to the telemetry, see above). */
const SYSTEM_TABLES = new Set(['one', 'numbers', 'numbers_mt', 'zeros', 'zeros_mt', 'databases', 'tables', 'columns', 'functions']);

/** A name that needs no quoting: anything else (a path, a name with dots or spaces) is refused where a table is named. */
const PLAIN_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export class QueryScope {
  private readonly tables: ReadonlySet<string>;

  /** `database`: the telemetry database (SLUICE_CLICKHOUSE_DATABASE), the one current database a request may have. */
  constructor(readonly database: string, tables: readonly string[] = TELEMETRY_TABLES) {
    this.tables = new Set(tables);
  }

  /** What it shows, for a refusal's message. */
  get description(): string {
    return `the telemetry tables of ${this.database} and the system tables ${[...SYSTEM_TABLES].join(', ')}`;
  }

  allowsDatabase(name: string): boolean {
    return name === this.database;
  }

  /**
   * A table named `database.table` or `table` (the current database's, or a WITH clause's) as
   * EXPLAIN AST writes it. An unqualified plain name that is not a telemetry table is `maybe`:
   * it is a WITH clause's subquery, or a table of the current database the caller must look up.
   */
  allowsTable(name: string): 'yes' | 'no' | 'maybe' {
    const dot = name.indexOf('.');
    if (dot < 0) return this.tables.has(name) ? 'yes' : PLAIN_NAME.test(name) ? 'maybe' : 'no';
    const [database, table] = [name.slice(0, dot), name.slice(dot + 1)];
    if (database === 'system') return SYSTEM_TABLES.has(table) ? 'yes' : 'no';
    return database === this.database && this.tables.has(table) ? 'yes' : 'no';
  }

  /** The value of `additional_table_filters` that keeps the system listings to the telemetry tables. */
  listingFilters(): string {
    const database = quoteString(this.database);
    const tables = [...this.tables].map(quoteString).join(', ');
    const filters = [
      ['system.databases', `name = ${database}`],
      ['system.tables', `database = ${database} AND name IN (${tables})`],
      ['system.columns', `database = ${database} AND table IN (${tables})`],
    ];
    return `{${filters.map(([table, filter]) => `${quoteString(table!)}: ${quoteString(filter!)}`).join(', ')}}`;
  }
}
