/**
 * ExportMetricsServiceRequest bytes → RowBinary rows in the five metrics tables, one row
 * per data point. The metric-level columns (MetricName, MetricDescription, MetricUnit and,
 * for sums and histograms, AggregationTemporality and IsMonotonic) are encoded once per
 * Metric as a further level of the row prefix; the point writers (metric-points.ts) add the
 * rest. A Metric with no data, or with a data kind this version of OTLP does not define,
 * has no points to store and is passed over.
 */
import type { TableName } from '../../storage/schema.ts';
import { RowPrefix, walkRequest } from './envelope.ts';
import {
  pointDay, type PointWriter, writeExpHistogramPoint, writeHistogramPoint, writeNumberPoint, writeSummaryPoint,
} from './metric-points.ts';
import { TranscodeOutput, type TranscodeResult } from '../../storage/table-rows.ts';
import { fieldTag, LEN, VARINT, WireReader } from './wire.ts';

const NAME = fieldTag(1, LEN);
const DESCRIPTION = fieldTag(2, LEN);
const UNIT = fieldTag(3, LEN);
const GAUGE = fieldTag(5, LEN);
const SUM = fieldTag(7, LEN);
const HISTOGRAM = fieldTag(9, LEN);
const EXPONENTIAL_HISTOGRAM = fieldTag(10, LEN);
const SUMMARY = fieldTag(11, LEN);

// Inside Gauge, Sum, Histogram, ExponentialHistogram and Summary.
const DATA_POINTS = fieldTag(1, LEN);
const AGGREGATION_TEMPORALITY = fieldTag(2, VARINT);
const IS_MONOTONIC = fieldTag(3, VARINT);

interface MetricKind {
  table: TableName;
  writePoint: PointWriter;
  /** Which metric-level columns the table has after MetricUnit. */
  temporality: boolean;
  monotonic: boolean;
}

const KINDS = new Map<number, MetricKind>([
  [GAUGE, { table: 'otel_metrics_gauge', writePoint: writeNumberPoint, temporality: false, monotonic: false }],
  [SUM, { table: 'otel_metrics_sum', writePoint: writeNumberPoint, temporality: true, monotonic: true }],
  [HISTOGRAM, { table: 'otel_metrics_histogram', writePoint: writeHistogramPoint, temporality: true, monotonic: false }],
  [EXPONENTIAL_HISTOGRAM, { table: 'otel_metrics_exp_histogram', writePoint: writeExpHistogramPoint, temporality: true, monotonic: false }],
  [SUMMARY, { table: 'otel_metrics_summary', writePoint: writeSummaryPoint, temporality: false, monotonic: false }],
]);

export function transcodeMetrics(body: Uint8Array, sourceId: string, maxChunkBytes = Infinity): TranscodeResult {
  const r = new WireReader(body);
  const output = new TranscodeOutput(maxChunkBytes);
  // The resource and scope columns are the same in all five tables: one prefix serves all.
  const prefix = new RowPrefix('otel_metrics_gauge', sourceId, output.scratchWriter());
  let index = 0;
  try {
    walkRequest(r, prefix, (metricStart, metricEnd) => {
      let nameStart = metricStart, nameEnd = metricStart, descriptionStart = metricStart, descriptionEnd = metricStart;
      let unitStart = metricStart, unitEnd = metricStart, dataTag = 0, dataStart = 0, dataEnd = 0;
      r.pos = metricStart;
      while (r.pos < metricEnd) {
        const tag = r.tag(metricEnd);
        if ((tag & 7) !== LEN || !(tag === NAME || tag === DESCRIPTION || tag === UNIT || KINDS.has(tag))) {
          r.skip(tag, metricEnd);
          continue;
        }
        const fieldEnd = r.len(metricEnd);
        if (tag === NAME) [nameStart, nameEnd] = [r.pos, fieldEnd];
        else if (tag === DESCRIPTION) [descriptionStart, descriptionEnd] = [r.pos, fieldEnd];
        else if (tag === UNIT) [unitStart, unitEnd] = [r.pos, fieldEnd];
        else [dataTag, dataStart, dataEnd] = [tag, r.pos, fieldEnd]; // a oneof: the last wins
        r.pos = fieldEnd;
      }
      r.expectEnd(metricEnd);
      const kind = KINDS.get(dataTag);
      if (!kind) return;

      const metric = prefix.extend();
      metric.utf8(r.buf, nameStart, nameEnd);
      metric.utf8(r.buf, descriptionStart, descriptionEnd);
      metric.utf8(r.buf, unitStart, unitEnd);
      if (kind.temporality) {
        let temporality = 0, monotonic = 0;
        r.pos = dataStart;
        while (r.pos < dataEnd) {
          const tag = r.tag(dataEnd);
          if (tag === AGGREGATION_TEMPORALITY) temporality = r.uint32(dataEnd);
          else if (tag === IS_MONOTONIC) monotonic = r.uint32(dataEnd) === 0 ? 0 : 1;
          else r.skip(tag, dataEnd);
        }
        r.expectEnd(dataEnd);
        metric.i32(temporality);
        if (kind.monotonic) metric.u8(monotonic);
      }

      const table = output.table(kind.table);
      const w = table.writer;
      let next = dataStart;
      for (;;) {
        const pointEnd = r.seek(next, dataEnd, DATA_POINTS);
        if (pointEnd < 0) break;
        index++;
        const rowStart = w.pos;
        prefix.copyInto(w);
        const problem = kind.writePoint(r, w, r.pos, pointEnd);
        if (problem) {
          w.truncate(rowStart);
          output.reject(`data point ${index} (metric ${JSON.stringify(Buffer.from(r.buf.subarray(nameStart, nameEnd)).toString())}): ${problem}`);
        } else {
          table.rowDay(pointDay(r));
          table.endRow();
          output.accepted++;
        }
        next = pointEnd;
      }
    });
  } catch (err) {
    output.discard();
    throw err;
  }
  return output.finish();
}
