/**
 * The URL parameters of a request to the query endpoint, read as ClickHouse's HTTP interface
 * reads them: a few are the interface's own (query, database, default_format, query_id,
 * param_*, compression...), every other one is a setting. Settings are what a readonly user
 * could lift the limits with, so the endpoint takes few: its limits only lowered, a handful of
 * output settings, and nothing else (ClickHouse refuses a readonly = 1 user any setting).
 *
 * Every statement then runs with the SETTINGS clause built here: readonly = 1 (the engine's
 * own read-only check), the limits (the client's lower ones where it asked), introspection
 * off, and the filters that keep the system listings to the telemetry tables (scope.ts).
 *
 * Memory: max_memory_usage bounds each statement; the engine checks it at every allocation,
 * so it also stops work inside one block, which max_execution_time (checked between blocks)
 * cannot: `arrayMap(…, range(300000000))` is one block, and fails at once on its 1.1 GiB
 * allocation. max_memory_usage_for_user is not used: every chDB session is the one user
 * `default`, the ingestion's inserts too, so a per-user cap set by a query applies to the
 * inserts running beside it (tried: an insert-sized statement without the setting failed with
 * "User memory limit exceeded"), and any statement without it lifts it again. The endpoint's
 * total is its gate instead: SLUICE_QUERY_MAX_CONCURRENT statements at once, each within
 * max_memory_usage.
 */
import { quoteString } from '../storage/storage.ts';
import { ClickHouseException } from './errors.ts';
import type { QueryScope } from './scope.ts';

/** The endpoint's limits on one statement (SLUICE_QUERY_*). */
export interface QueryLimits {
  maxExecutionSeconds: number;
  maxResultRows: number;
  maxResultBytes: number;
  resultOverflowMode: 'throw' | 'break';
  /** max_memory_usage: the engine's memory for one statement. */
  maxMemoryBytes: number;
}

export interface QueryParams {
  /** The `query` parameter (the body, when there is one, follows it). */
  query: string | undefined;
  database: string | undefined;
  /** The output format of a statement without a FORMAT clause. */
  defaultFormat: string | undefined;
  queryId: string | undefined;
  /** client_protocol_version: the Native layout the client reads (0: the plain one). */
  protocolVersion: number;
  /** enable_http_compression=1: the answer may be compressed as Accept-Encoding allows. */
  compress: boolean;
  /** Values of the statement's {name:Type} placeholders (param_name). */
  params: Record<string, string>;
  /** The SETTINGS clause every statement runs with (without the keyword). */
  settings: string;
}

/** Parameters of the HTTP interface that are not settings, and have nothing to do here (sessions, progress headers, buffering...). */
const TOLERATED = new Set([
  'user', 'password', 'quota_key', 'role', 'session_id', 'session_timeout', 'session_check', 'wait_end_of_query',
  'send_progress_in_http_headers', 'http_headers_progress_interval_ms', 'buffer_size', 'http_response_buffer_size',
  'http_zlib_compression_level', 'http_native_compression_disable_checksumming_on_decompress', 'cancel_http_readonly_queries_on_client_close',
]);

/** Settings a client may set: they shape the output, and lift no limit. */
const OUTPUT_SETTINGS = new Set([
  'limit', 'offset', 'date_time_output_format', 'session_timezone', 'extremes', 'low_cardinality_allow_in_native_format',
  'output_format_json_quote_64bit_integers', 'output_format_json_quote_64bit_floats', 'output_format_json_quote_denormals',
  'output_format_json_quote_decimals', 'output_format_json_named_tuples_as_objects', 'output_format_json_validate_utf8',
  'output_format_json_escape_forward_slashes', 'output_format_decimal_trailing_zeros', 'output_format_write_statistics',
  'output_format_tsv_crlf_end_of_line', 'output_format_csv_crlf_end_of_line',
]);

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const QUERY_ID = /^[\x21-\x7e]{1,128}$/;
/** A setting's value that needs no more than quoting: no control characters. */
const PLAIN_VALUE = /^[^\x00-\x1f\x7f]{0,256}$/;

export function parseQueryParams(search: URLSearchParams, limits: QueryLimits, scope: QueryScope): QueryParams {
  const result: QueryParams = {
    query: undefined, database: undefined, defaultFormat: undefined, queryId: undefined, protocolVersion: 0, compress: false, params: {}, settings: '',
  };
  const settings = new Map<string, string>([
    ['readonly', '1'],
    ['max_execution_time', String(limits.maxExecutionSeconds)],
    ['max_result_rows', String(limits.maxResultRows)],
    ['max_result_bytes', String(limits.maxResultBytes)],
    ['result_overflow_mode', quoteString(limits.resultOverflowMode)],
    ['timeout_overflow_mode', quoteString('throw')],
    ['max_memory_usage', String(limits.maxMemoryBytes)],
    // system.stack_trace's symbols, addressToLine... tell where the process's code and files are.
    ['allow_introspection_functions', '0'],
    ['additional_table_filters', scope.listingFilters()],
  ]);
  for (const [name, value] of search) {
    if (name.startsWith('param_')) {
      const param = name.slice('param_'.length);
      if (!NAME.test(param)) throw ClickHouseException.of('BAD_ARGUMENTS', `bad query parameter name ${JSON.stringify(param)}`);
      // ClickHouse reads a value's escapes by its type; chDB's binding escapes the text once more
      // (a String value's `\t` would arrive as backslash and t): refused rather than read otherwise.
      if (value.includes('\\')) throw ClickHouseException.of('BAD_ARGUMENTS', `query parameter ${param}: values with backslash escapes are not supported here`);
      result.params[param] = value;
      continue;
    }
    switch (name) {
      case 'query': result.query = value; break;
      case 'database': result.database = value; break;
      // Echoed in a header: anything else gets an id of ours, as a request without one does.
      case 'query_id': if (QUERY_ID.test(value)) result.queryId = value; break;
      case 'default_format': result.defaultFormat = formatName(value); break;
      case 'client_protocol_version': result.protocolVersion = unsigned(name, value); break;
      case 'enable_http_compression': result.compress = value === '1' || value === 'true'; break;
      case 'compress':
      case 'decompress':
        if (value !== '0') throw ClickHouseException.of('NOT_IMPLEMENTED', `${name}=1 (ClickHouse's block compression) is not supported here; compress with enable_http_compression=1 and Accept-Encoding instead`);
        break;
      default:
        if (!TOLERATED.has(name)) settings.set(name, clientSetting(name, value, limits));
    }
  }
  result.settings = [...settings].map(([name, value]) => `${name} = ${value}`).join(', ');
  return result;
}

/** The SQL value of a setting the client may set; refuses one that would lift a limit, or any other. */
function clientSetting(name: string, value: string, limits: QueryLimits): string {
  switch (name) {
    case 'max_execution_time': return lowered(name, value, limits.maxExecutionSeconds);
    case 'max_result_rows': return lowered(name, value, limits.maxResultRows);
    case 'max_result_bytes': return lowered(name, value, limits.maxResultBytes);
    case 'max_memory_usage': return lowered(name, value, limits.maxMemoryBytes);
    case 'result_overflow_mode':
    case 'timeout_overflow_mode':
      if (value !== 'throw' && value !== 'break') throw ClickHouseException.of('BAD_ARGUMENTS', `${name} is throw or break`);
      return quoteString(value);
    case 'readonly':
      if (value !== '1') throw ClickHouseException.of('READONLY', 'Cannot modify \'readonly\' setting in readonly mode');
      return '1';
  }
  if (!OUTPUT_SETTINGS.has(name)) throw ClickHouseException.of('READONLY', `Cannot modify '${NAME.test(name) ? name : 'this'}' setting in readonly mode`);
  if (!PLAIN_VALUE.test(value)) throw ClickHouseException.of('BAD_ARGUMENTS', `bad value of setting ${name}`);
  return quoteString(value);
}

/** A limit the client may lower, never lift (0 is no limit in ClickHouse: refused too). */
function lowered(name: string, value: string, ours: number): string {
  const asked = /^\d+(\.\d+)?$/.test(value) ? Number(value) : NaN;
  if (Number.isNaN(asked)) throw ClickHouseException.of('BAD_ARGUMENTS', `${name} must be a number`);
  if (asked === 0 || asked > ours) throw ClickHouseException.of('SETTING_CONSTRAINT_VIOLATION', `Setting ${name} shouldn't be greater than ${ours} here`);
  return String(asked);
}

function unsigned(name: string, value: string): number {
  if (!/^\d{1,9}$/.test(value)) throw ClickHouseException.of('BAD_ARGUMENTS', `${name} must be a number`);
  return Number(value);
}

/** An output format's name (it goes to the engine and into a header). */
export function formatName(value: string): string {
  if (!NAME.test(value)) throw ClickHouseException.of('BAD_ARGUMENTS', `bad format name ${JSON.stringify(value.slice(0, 64))}`);
  return value;
}
