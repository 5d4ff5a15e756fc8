/** Migration 5: otel_traces_trace_id_ts on AggregatingMergeTree. */
import { quoteIdentifier } from '../storage.ts';
import { onClusterClause, storedName, tableEngine, tableSql, traceIdTsTable, traceIdTsView, type SchemaOptions } from './ddl.ts';
import type { Migration } from './migration.ts';

/** The lookup's stored table: in distributed mode the local one under the Distributed table, which follows it by name. */
const lookupName = (options: SchemaOptions) => storedName('otel_traces_trace_id_ts', options);
/** Migration 5's other table: the new one until the swap, the old one after it. */
const TRACE_ID_TS_SWAP = 'otel_traces_trace_id_ts_swap';
const isAggregating = (engine: string | undefined) => engine?.endsWith('AggregatingMergeTree') === true;

export const migration5: Migration = {
  version: 5,
  name: 'otel_traces_trace_id_ts on AggregatingMergeTree',
  /**
   * Migration 1 made the trace id lookup a MergeTree; the exporter's is an AggregatingMergeTree
   * (a trace's rows of one week merge into one). A table's engine cannot change, so a new table
   * takes the old one's place:
   *   1. create the new table beside the old, empty;
   *   2. EXCHANGE them, atomically: the view writes to the table by name, so from the next
   *      insert on it fills the new one, and no insert finds the table missing;
   *   3. attach the old one's parts to the new (hard links: no rows are read or rewritten);
   *   4. drop the old one.
   * Each step is emitted only while the state it changes is there: interrupted after the swap,
   * the next run does 3 and 4 only. Rows attached twice (a run interrupted between 3 and 4)
   * are harmless: min and max merge them into the same row. The rows are derived from
   * otel_traces and can be rebuilt from it at any time (docs/reference/storage.md).
   */
  statements(db, options, tables) {
    const q = (table: string) => `${quoteIdentifier(db)}.${quoteIdentifier(table)}`;
    const onCluster = onClusterClause(options);
    const lookup = lookupName(options);
    const lookupTable = (name: string) => traceIdTsTable(tableSql(db, name, options,
      { column: 'toDateTime(Start)', days: options.ttlDays?.otel_traces }, tableEngine(options, 'AggregatingMergeTree')));
    const engine = tables.get(lookup);
    const statements: string[] = [];
    if (engine === undefined) statements.push(lookupTable(lookup));
    else if (!isAggregating(engine)) {
      statements.push(lookupTable(TRACE_ID_TS_SWAP), `EXCHANGE TABLES ${q(lookup)} AND ${q(TRACE_ID_TS_SWAP)}${onCluster}`);
    }
    if (engine !== undefined && (!isAggregating(engine) || tables.has(TRACE_ID_TS_SWAP))) {
      statements.push(
        `ALTER TABLE ${q(lookup)}${onCluster} ATTACH PARTITION ALL FROM ${q(TRACE_ID_TS_SWAP)}`,
        `DROP TABLE IF EXISTS ${q(TRACE_ID_TS_SWAP)}${onCluster} SYNC`,
      );
    }
    // Unchanged when it exists (it only ever names its target): created where it is missing.
    statements.push(traceIdTsView(q('otel_traces_trace_id_ts_mv'), onCluster, q(lookup), q(storedName('otel_traces', options))));
    return statements;
  },
  // Two migrations swapping at the same moment could swap the tables back: then it is not done.
  verify(tables, options) {
    const lookup = lookupName(options);
    if (isAggregating(tables.get(lookup)) && !tables.has(TRACE_ID_TS_SWAP)) return undefined;
    return `${lookup} is ${tables.get(lookup) ?? 'missing'}${tables.has(TRACE_ID_TS_SWAP) ? ` and ${TRACE_ID_TS_SWAP} is left` : ''}`;
  },
};
