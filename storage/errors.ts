/**
 * Storage errors, classified once for both drivers (chDB in process, a ClickHouse server over
 * HTTP). What the bus does with a failed insert depends only on the class:
 *
 *   bad_request  the rows themselves are refused (they do not parse as the columns, or they
 *                span more partitions than one insert may create): the same bytes fail every
 *                time, so the batch is split to find them and they are refused or dead-lettered;
 *   unavailable  anything else the engine or the transport reports (no connection, timeout,
 *                out of memory or disk, too many parts, a missing table): storage must recover,
 *                nothing is the rows' fault, so the batch is retried and never dead-lettered.
 *
 * An error that is not a ClickHouse exception and not a transport failure is a bug and stays
 * `internal`.
 */
import { ClickHouseError } from '@clickhouse/client';
import { SluiceError } from '../core/errors.ts';

/**
 * Exception codes that blame the rows (RowBinary that does not parse as the columns): the same
 * bytes fail every time.
 */
const DATA_ERRORS = new Map<number, string>([
  [6, 'CANNOT_PARSE_TEXT'], [26, 'CANNOT_PARSE_QUOTED_STRING'], [27, 'CANNOT_PARSE_INPUT_ASSERTION_FAILED'],
  [32, 'ATTEMPT_TO_READ_AFTER_EOF'], [33, 'CANNOT_READ_ALL_DATA'], [38, 'CANNOT_PARSE_DATE'],
  [41, 'CANNOT_PARSE_DATETIME'], [70, 'CANNOT_CONVERT_TYPE'], [72, 'CANNOT_PARSE_NUMBER'],
  [117, 'INCORRECT_DATA'], [128, 'TOO_LARGE_ARRAY_SIZE'], [131, 'TOO_LARGE_STRING_SIZE'],
  [190, 'SIZES_OF_ARRAYS_DONT_MATCH'], [321, 'VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE'],
  [349, 'CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN'],
]);

/**
 * Code 252 (TOO_MANY_PARTS) means two things: too many parts in a table (merges are behind:
 * storage must recover) or too many partitions in one insert (max_partitions_per_insert_block:
 * these rows, inserted together, never fit). Only the text tells them apart: "for single INSERT
 * block" in the servers we know, "for a single INSERT block" in ClickHouse's documentation.
 * (Our inserts lift that limit, see storage/chdb.ts; a server that refuses to lift it still
 * refuses the rows, not itself.)
 */
const TOO_MANY_PARTITIONS = /too many partitions for (a )?single insert block/i;

export interface ServerException {
  code: number;
  name: string | undefined;
  text: string;
}

/**
 * The exception ClickHouse reported, or undefined for anything else. Recognises the client's
 * ClickHouseError (code and type), chDB's errors (`clickhouseCode`) and the plain text servers
 * before 21.x send ("Code: 33, e.displayText() = DB::Exception: <text>, e.what() = ...").
 */
export function clickhouseException(err: unknown): ServerException | undefined {
  if (!(err instanceof Error)) return undefined;
  const fields = err as Error & { clickhouseCode?: unknown };
  const text = err.message.trim();
  if (typeof fields.clickhouseCode === 'number') {
    // "Code: 252. DB::Exception: <text> (NAME) (version 26.7.2.1). (NAME)"
    const name = /\(([A-Z_]+)\)\s*$/.exec(text)?.[1];
    const bare = text.replace(/^Code: \d+\. DB::Exception: /, '').replace(/(\s*\((?:[A-Z_]+|version [^)]*)\)\.?)+\s*$/, '');
    return { code: fields.clickhouseCode, name, text: bare };
  }
  if (err instanceof ClickHouseError) return { code: Number(err.code), name: err.type, text };
  const match = /^Code: (\d+)[.,].*?DB::Exception: (.*?)(?:, e\.what\(\) = .*)?$/s.exec(text);
  return match ? { code: Number(match[1]), name: undefined, text: match[2]!.trim() } : undefined;
}

/** `code 33 CANNOT_READ_ALL_DATA: <text>`. */
export function describeException(exception: ServerException): string {
  const name = exception.name ?? DATA_ERRORS.get(exception.code);
  return `code ${exception.code}${name ? ` ${name}` : ''}: ${exception.text}`;
}

/** Whether ClickHouse refused the rows themselves (see the module comment). */
export function isDataException(exception: ServerException): boolean {
  return DATA_ERRORS.has(exception.code) || (exception.code === 252 && TOO_MANY_PARTITIONS.test(exception.text));
}

/**
 * A failed insert into `table` as a classified SluiceError. `transport(err)` tells whether a
 * non-ClickHouse error is the way to storage failing (connection refused, timeout, a file that
 * could not be written) rather than a bug.
 */
export function insertError(err: unknown, table: string, transport: (err: unknown) => boolean, hint = ''): SluiceError {
  if (err instanceof SluiceError) return err;
  const exception = clickhouseException(err);
  if (exception && isDataException(exception)) {
    const reason = exception.code === 252
      ? `they span more partitions (days) than ClickHouse takes in one insert (max_partitions_per_insert_block): ${exception.text.split('. ')[0]}`
      : describeException(exception);
    return new SluiceError('bad_request', `storage refused the rows for ${table}: ${reason}`, { cause: err });
  }
  if (exception) {
    return new SluiceError('unavailable', `storage did not take the insert into ${table}: ${describeException(exception)}${hint}`, { cause: err });
  }
  if (transport(err)) {
    const reason = err instanceof Error ? err.message : String(err);
    return new SluiceError('unavailable', `storage is unavailable: ${reason}`, { cause: err });
  }
  return new SluiceError('internal', `insert into ${table} failed unexpectedly: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}

/** Whether a failed insert can succeed if the same rows are sent again later. */
export function isRetryableStorageError(err: unknown): boolean {
  return err instanceof SluiceError && err.code === 'unavailable';
}

/** Whether the rows themselves were refused: split the batch to find them, never retry as is. */
export function isDataError(err: unknown): boolean {
  return err instanceof SluiceError && err.code === 'bad_request';
}
