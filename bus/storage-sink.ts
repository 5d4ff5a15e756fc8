/**
 * The storage side of the bus: groups a batch of chunks by table and inserts each table's
 * rows in one statement. Throws if any insert fails, so the bus refuses (memory) or does not
 * ack (JetStream) the whole batch.
 */
import type { ChunkSink, TableChunk } from './bus.ts';
import type { SluiceMetrics } from '../core/metrics.ts';
import type { InsertBatch, Storage } from '../storage/storage.ts';

export function groupByTable(chunks: readonly TableChunk[]): Array<InsertBatch & { rows: number }> {
  // Few groups (one per table), many chunks: a scan without building keys per chunk.
  const groups: Array<InsertBatch & { rows: number; chunks: Uint8Array[] }> = [];
  for (const chunk of chunks) {
    let group = groups.find((g) => g.table === chunk.table && sameColumns(g.columns, chunk.columns));
    if (!group) groups.push((group = { table: chunk.table, columns: chunk.columns, chunks: [], rows: 0 }));
    group.chunks.push(chunk.data);
    group.rows += chunk.rows;
  }
  return groups;
}

function sameColumns(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true; // chunks of one bus consumer share their column lists
  return a.length === b.length && a.every((column, i) => column === b[i]);
}

export function storageSink(storage: Storage, metrics: SluiceMetrics): ChunkSink {
  return async (chunks, dedupToken) => {
    const groups = groupByTable(chunks);
    for (const [index, batch] of groups.entries()) {
      // Each insert of the batch needs a token of its own, stable across redeliveries.
      if (dedupToken) batch.dedupToken = groups.length === 1 ? dedupToken : `${dedupToken}:${index}`;
      const stopTimer = metrics.insertSeconds.startTimer();
      try {
        await storage.insert(batch);
        metrics.inserts.inc({ table: batch.table, outcome: 'ok' });
        metrics.insertRows.inc({ table: batch.table }, batch.rows);
        metrics.insertBatchRows.observe({ table: batch.table }, batch.rows);
      } catch (err) {
        metrics.inserts.inc({ table: batch.table, outcome: 'failed' });
        throw err;
      } finally {
        stopTimer();
      }
    }
  };
}
