/** Migration 5: otel_traces_trace_id_ts on AggregatingMergeTree. */
import { quoteIdentifier } from '../storage.ts';
import { onClusterClause, tableEngine, tableSql, traceIdTsTable, traceIdTsView } from './ddl.ts';
import type { Migration } from './migration.ts';

const TRACE_ID_TS = 'otel_traces_trace_id_ts';
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
    const lookupTable = (name: string) => traceIdTsTable(tableSql(db, name, options,
      { column: 'toDateTime(Start)', days: options.ttlDays?.otel_traces }, tableEngine(options, 'AggregatingMergeTree')));
    const engine = tables.get(TRACE_ID_TS);
    const statements: string[] = [];
    if (engine === undefined) statements.push(lookupTable(TRACE_ID_TS));
    else if (!isAggregating(engine)) {
      statements.push(lookupTable(TRACE_ID_TS_SWAP), `EXCHANGE TABLES ${q(TRACE_ID_TS)} AND ${q(TRACE_ID_TS_SWAP)}${onCluster}`);
    }
    if (engine !== undefined && (!isAggregating(engine) || tables.has(TRACE_ID_TS_SWAP))) {
      statements.push(
        `ALTER TABLE ${q(TRACE_ID_TS)}${onCluster} ATTACH PARTITION ALL FROM ${q(TRACE_ID_TS_SWAP)}`,
        `DROP TABLE IF EXISTS ${q(TRACE_ID_TS_SWAP)}${onCluster} SYNC`,
      );
    }
    // Unchanged when it exists (it only ever names its target): created where it is missing.
    statements.push(traceIdTsView(q(`${TRACE_ID_TS}_mv`), onCluster, q(TRACE_ID_TS), q('otel_traces')));
    return statements;
  },
  // Two migrations swapping at the same moment could swap the tables back: then it is not done.
  verify: (tables) => isAggregating(tables.get(TRACE_ID_TS)) && !tables.has(TRACE_ID_TS_SWAP)
    ? undefined
    : `${TRACE_ID_TS} is ${tables.get(TRACE_ID_TS) ?? 'missing'}${tables.has(TRACE_ID_TS_SWAP) ? ` and ${TRACE_ID_TS_SWAP} is left` : ''}`,
};
