/**
 * How a console query becomes a statement: SQL written by us, every value of the user's (and the
 * tenant's SourceIds) bound as a `{name:Type}` query parameter that the engine binds as data,
 * never spliced into the text; the limits' SETTINGS clause at the end; the answer read as
 * JSONEachRow.
 *
 * Values are passed as they are: each driver escapes them for its transport (chDB's
 * queryBindAsync and @clickhouse/client's query_params both escape backslashes, quotes, tabs
 * and newlines, and the engine reads them back into the same bytes).
 */
import type { StatementRunner } from '../../storage/chdb-reader.ts';
import type { TimeRange } from '../api.ts';
import { settingsClause, type ConsoleQueryLimits } from './config.ts';
import { queryError } from './errors.ts';

/** The ClickHouse types our placeholders use. */
export type ParamType = 'String' | 'Int64' | 'UInt32';

/** The parameters of one statement, named p0, p1... in the order they are bound. */
export class Params {
  readonly values: Record<string, string> = {};
  private count = 0;

  /** A placeholder for `value`, e.g. `{p3:String}`. */
  bind(value: string | number, type: ParamType): string {
    const name = `p${this.count++}`;
    if (typeof value === 'number') {
      // Numbers come from validated input, whole; one that is not is our bug.
      if (!Number.isSafeInteger(value)) throw new Error(`bad ${type} parameter: ${value}`);
      this.values[name] = String(value);
    } else {
      this.values[name] = value;
    }
    return `{${name}:${type}}`;
  }

  /** `({p0:String}, {p1:String}, ...)`, for IN; one placeholder per value, so each is bound as data. */
  list(values: readonly string[]): string {
    return `(${values.map((value) => this.bind(value, 'String')).join(', ')})`;
  }

  /** `column IN (sources...)`: the tenant's restriction, in every statement on every table. */
  sources(column: string, sources: readonly string[]): string {
    if (sources.length === 0) throw new Error('a statement without sources would read every tenant');
    return `${column} IN ${this.list(sources)}`;
  }

  /**
   * The range's bounds, bound once, for `within` on any number of columns: `from` and `to` as
   * DateTime64(3) expressions (ClickHouse compares them with DateTime and DateTime64(9) columns).
   */
  range({ from, to }: TimeRange): Bounds {
    return { from: this.millis(from), to: this.millis(to) };
  }

  /** A Unix-millisecond time as a DateTime64(3) expression. */
  millis(ms: number): string {
    return `fromUnixTimestamp64Milli(${this.bind(ms, 'Int64')})`;
  }
}

/** Placeholders of a time range (Params.range). */
export interface Bounds { from: string; to: string }

/** `column >= from AND column < to`. */
export function within(column: string, { from, to }: Bounds): string {
  return `${column} >= ${from} AND ${column} < ${to}`;
}

/** The statements of one ConsoleQueries: its runner, database and limits. */
export class StatementExecutor {
  private readonly settings: string;

  constructor(
    private readonly runner: StatementRunner,
    private readonly database: string,
    private readonly limits: Readonly<ConsoleQueryLimits>,
  ) {
    this.settings = settingsClause(limits);
  }

  /** Runs `sql` with `params` bound and the limits applied; the rows, parsed. */
  async rows<T>(sql: string, params: Params): Promise<T[]> {
    let bytes: Uint8Array;
    try {
      ({ bytes } = await this.runner.run(this.database, `${sql}\nSETTINGS ${this.settings}`, { format: 'JSONEachRow', params: params.values }));
    } catch (err) {
      throw queryError(err, this.limits);
    }
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
    const rows: T[] = [];
    for (const line of text.split('\n')) if (line) rows.push(JSON.parse(line) as T);
    return rows;
  }
}

/** Unix nanoseconds (an exact decimal string) to Unix milliseconds, rounded down. */
export function nanosToMillis(ns: string): number {
  return ns.length <= 6 ? 0 : Number(ns.slice(0, -6));
}

/**
 * `map[key] = value`, where a key that is missing reads as ''. So a filter on an empty value
 * also needs the key to be there.
 */
export function mapEquals(map: string, key: string, value: string, empty: boolean): string {
  return empty ? `(mapContains(${map}, ${key}) AND ${map}[${key}] = ${value})` : `${map}[${key}] = ${value}`;
}
