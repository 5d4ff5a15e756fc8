/**
 * The Logs page's volume chart: entries per bucket as bars stacked by severity band, most severe
 * at the bottom, over the page's whole range. Dragging across it narrows the range (the table
 * and facets follow the URL).
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import type { LogSummary, SeverityBand, TimeRange } from '../api.ts';
import { compactNumber, dragToZoom, mountChart, timeAxis, valueAxis } from './chart.tsx';
import { zoomTo } from './time-range.tsx';
import { formatDateTime } from './time.ts';

/** Bottom to top; the colours of the table's severity words, lighter for the less severe. */
export const BAND_COLOURS: Array<[SeverityBand, string]> = [
  ['fatal', '#7f1d1d'], ['error', '#b91c1c'], ['warn', '#d97706'], ['info', '#2563eb'], ['debug', '#94a3b8'], ['trace', '#cbd5e1'], ['unset', '#64748b'],
];

/**
 * uPlot's columns for the stack: every bucket of the range (empty ones as 0, so bars keep their
 * width), and for each band shown the running total up to it, so each series' bar reaches from
 * the band below to its own top. `counts` keeps each band's own count for the legend.
 */
export function stackVolume(summary: Pick<LogSummary, 'stepMs' | 'volume'>, range: TimeRange): { data: uPlot.AlignedData; bands: Array<[SeverityBand, string]>; counts: number[][] } {
  const { stepMs, volume } = summary;
  const first = Math.floor(range.from / stepMs) * stepMs;
  const times: number[] = [];
  for (let time = first; time < range.to; time += stepMs) times.push(time);
  const at = new Map(volume.map((bucket) => [bucket.time, bucket.counts]));
  const bands = BAND_COLOURS.filter(([band]) => volume.some((bucket) => bucket.counts[band]));
  const counts = bands.map(([band]) => times.map((time) => at.get(time)?.[band] ?? 0));
  const running = times.map(() => 0);
  const stacked = counts.map((column) => column.map((count, i) => (running[i]! += count)));
  return { data: [times.map((time) => time / 1000), ...stacked], bands, counts };
}

interface VolumeChartProps {
  summary: LogSummary;
  range: TimeRange;
  height?: number;
}

export function VolumeChart({ summary, range, height = 120 }: VolumeChartProps) {
  const holder = useRef<HTMLDivElement>(null);

  useEffect(() => {
    const target = holder.current;
    if (!target) return;
    const { data, bands, counts } = stackVolume(summary, range);
    const bars = uPlot.paths.bars!({ size: [0.9, 40], align: 1 });
    const options: uPlot.Options = {
      width: Math.max(target.clientWidth, 200),
      height,
      scales: { x: { time: true, range: () => [range.from / 1000, range.to / 1000] }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      series: [
        { value: (_u: uPlot, value: number | null) => (value == null ? '–' : `${formatDateTime(value * 1000)} (${summary.stepMs / 1000 >= 60 ? `${summary.stepMs / 60_000} min` : `${summary.stepMs / 1000} s`})`) },
        ...bands.map(([band, colour], i) => ({
          label: band,
          fill: colour,
          stroke: colour,
          width: 0,
          paths: bars,
          points: { show: false },
          // The legend shows the band's own count, not the stack's height.
          value: (_u: uPlot, _value: number | null, _series: number, index: number | null) => (index == null ? '–' : compactNumber(counts[i]![index]!)),
        })),
      ],
      axes: [timeAxis(range.to - range.from), valueAxis('')],
      legend: { live: true },
      ...dragToZoom(zoomTo),
    };
    // uPlot draws series in order: the top band's stack (the tallest) first, each lower band's
    // over it, so every bar shows its own part. The legend reads from the least severe.
    const order = bands.map((_, i) => bands.length - i);
    return mountChart({ ...options, series: [options.series[0]!, ...order.map((i) => options.series[i]!)] }, [data[0]!, ...order.map((i) => data[i]!)] as uPlot.AlignedData, target);
  }, [summary, range.from, range.to, height]);

  return <div class="chart volume" ref={holder} data-testid="logs-volume" data-total={summary.total} aria-label={`Log volume: ${summary.total} entries in the range, by severity`} role="img" />;
}
