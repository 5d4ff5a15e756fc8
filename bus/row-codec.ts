/**
 * The bus's records in the local log (record-log.ts): one request's rows, as
 *
 *   u16 chunks, then per chunk: u16 + table, u16 + columns (comma-joined), u32 rows, u32 + RowBinary
 *
 * (little endian). The RowBinary is written as it is (no copy) and read back as a view.
 */
import type { TableChunk } from './bus.ts';
import type { RecordCodec } from './record-log.ts';

export const ROW_CODEC: RecordCodec<readonly TableChunk[]> = {
  encode(chunks) {
    const count = Buffer.allocUnsafe(2);
    count.writeUInt16LE(chunks.length, 0);
    const parts: Uint8Array[] = [count];
    for (const chunk of chunks) {
      const table = Buffer.from(chunk.table);
      const columns = Buffer.from(chunk.columns.join(','));
      const meta = Buffer.allocUnsafe(2 + table.length + 2 + columns.length + 8);
      let at = meta.writeUInt16LE(table.length, 0);
      at += table.copy(meta, at);
      at = meta.writeUInt16LE(columns.length, at);
      at += columns.copy(meta, at);
      at = meta.writeUInt32LE(chunk.rows, at);
      meta.writeUInt32LE(chunk.data.byteLength, at);
      parts.push(meta, chunk.data);
    }
    return parts;
  },

  decode(payload) {
    const chunks: TableChunk[] = [];
    const count = payload.readUInt16LE(0);
    let at = 2;
    for (let i = 0; i < count; i++) {
      const tableLength = payload.readUInt16LE(at);
      const table = payload.toString('utf8', at + 2, at + 2 + tableLength);
      at += 2 + tableLength;
      const columnsLength = payload.readUInt16LE(at);
      const columns = payload.toString('utf8', at + 2, at + 2 + columnsLength).split(',');
      at += 2 + columnsLength;
      const rows = payload.readUInt32LE(at);
      const dataLength = payload.readUInt32LE(at + 4);
      at += 8;
      chunks.push({ table, columns, rows, data: payload.subarray(at, at + dataLength) });
      at += dataLength;
    }
    return chunks;
  },
};
