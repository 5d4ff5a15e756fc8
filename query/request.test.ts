import { describe, expect, it } from 'vitest';
import { ClickHouseException } from './errors.ts';
import { parseQueryParams, type QueryLimits } from './request.ts';
import { QueryScope } from './scope.ts';

const LIMITS: QueryLimits = { maxExecutionSeconds: 30, maxResultRows: 1000, maxResultBytes: 1 << 20, resultOverflowMode: 'throw', maxMemoryBytes: 256 << 20 };
const parse = (query: string) => parseQueryParams(new URLSearchParams(query), LIMITS, new QueryScope('otel', ['otel_traces', 'otel_logs']));

function refusal(query: string): { code: number; text: string } {
  try {
    parse(query);
  } catch (err) {
    if (err instanceof ClickHouseException) return { code: err.code, text: err.text };
    throw err;
  }
  throw new Error(`not refused: ${query}`);
}

describe('parseQueryParams', () => {
  it('runs every statement with readonly = 1, the limits, introspection off and the listings filtered', () => {
    expect(parse('').settings).toBe(
      "readonly = 1, max_execution_time = 30, max_result_rows = 1000, max_result_bytes = 1048576, result_overflow_mode = 'throw', timeout_overflow_mode = 'throw', " +
      'max_memory_usage = 268435456, allow_introspection_functions = 0, additional_table_filters = {' +
      "'system.databases': 'name = \\'otel\\'', " +
      "'system.tables': 'database = \\'otel\\' AND name IN (\\'otel_traces\\', \\'otel_logs\\')', " +
      "'system.columns': 'database = \\'otel\\' AND table IN (\\'otel_traces\\', \\'otel_logs\\')'}",
    );
  });

  it('reads the interface\'s own parameters as clickhouse-go and @clickhouse/client send them', () => {
    const params = parse('database=otel&default_format=Native&client_protocol_version=54460&query_id=q1&param_service=checkout&enable_http_compression=1&query=SELECT+1&session_id=s&wait_end_of_query=1&compress=0');
    expect(params).toMatchObject({ query: 'SELECT 1', database: 'otel', defaultFormat: 'Native', queryId: 'q1', protocolVersion: 54460, compress: true, params: { service: 'checkout' } });
    expect(params.settings).not.toMatch(/session_id|wait_end_of_query|compress/);
    expect(parse('query_id=a%0D%0Ab').queryId).toBeUndefined();
  });

  it('takes a limit the client lowers, and output settings, quoted', () => {
    const { settings } = parse("max_execution_time=5&max_result_rows=10&result_overflow_mode=break&limit=100&output_format_json_quote_64bit_integers=0&date_time_output_format=iso&readonly=1");
    expect(settings).toContain('max_execution_time = 5, max_result_rows = 10');
    expect(parse('max_memory_usage=1000000').settings).toContain('max_memory_usage = 1000000');
    expect(settings).toContain("result_overflow_mode = 'break'");
    expect(settings).toContain("limit = '100', output_format_json_quote_64bit_integers = '0', date_time_output_format = 'iso'");
    expect(settings.match(/readonly/g)).toHaveLength(1);
    // A value cannot end its quotes.
    expect(parse("date_time_output_format=iso', readonly = '0").settings).toContain("date_time_output_format = 'iso\\', readonly = \\'0'");
  });

  it('refuses settings that would lift a limit, and any other', () => {
    expect(refusal('max_execution_time=31')).toMatchObject({ code: 452, text: expect.stringMatching(/max_execution_time shouldn't be greater than 30/) });
    expect(refusal('max_execution_time=0').code).toBe(452);
    expect(refusal('max_result_rows=1000000').code).toBe(452);
    expect(refusal('max_result_bytes=0').code).toBe(452);
    expect(refusal('readonly=0')).toMatchObject({ code: 164, text: expect.stringMatching(/Cannot modify 'readonly' setting in readonly mode/) });
    expect(refusal('readonly=2').code).toBe(164);
    expect(refusal('max_memory_usage=0').code).toBe(452);
    expect(refusal('max_memory_usage=268435457')).toMatchObject({ code: 452, text: expect.stringMatching(/max_memory_usage shouldn't be greater than 268435456/) });
    expect(refusal('max_memory_usage_for_user=0').code).toBe(164);
    expect(refusal('allow_introspection_functions=1')).toMatchObject({ code: 164, text: expect.stringMatching(/Cannot modify 'allow_introspection_functions'/) });
    expect(refusal('additional_table_filters=%7B%7D').code).toBe(164);
    expect(refusal('allow_experimental_eval_table_function=1').code).toBe(164);
    expect(refusal('output_format_schema=/tmp/x').code).toBe(164);
    expect(refusal('max_execution_time=ten').code).toBe(36);
    expect(refusal('compress=1').code).toBe(48);
    expect(refusal('default_format=JSON%20SETTINGS').code).toBe(36);
    expect(refusal('param_a-b=1').code).toBe(36);
    expect(refusal('param_s=tab%5Ctab').text).toMatch(/query parameter s: values with backslash escapes are not supported/);
  });
});
