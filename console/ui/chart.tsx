/**
 * A time-series chart on uPlot: lines over the page's whole time range, deploy markers on top,
 * the width following its container; dragging across it zooms the page's range to the span.
 * uPlot draws on a canvas and sets element styles from script (CSSOM), which the console's
 * `default-src 'self'` policy allows.
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import type { DeployMarker, TimeRange } from '../api.ts';
import { deployMarkersPlugin } from './deploy-markers.ts';
import { api } from './api.ts';
import { zoomTo } from './time-range.tsx';
import { formatAxisTime, formatDateTime } from './time.ts';

export interface ChartLine {
  label: string;
  points: Array<[time: number, value: number | null]>;
}

/** Quiet colours that stay apart on white; no red, which means errors and refusals. A series beyond ten reuses one. */
export const PALETTE = ['#2563eb', '#059669', '#7c3aed', '#d97706', '#0891b2', '#db2777', '#4d7c0f', '#64748b', '#4338ca', '#0f766e'];

/** 1.2k, 3.4M: axis labels stay short. */
export function compactNumber(value: number): string {
  const size = Math.abs(value);
  if (size >= 1e9) return `${+(value / 1e9).toFixed(1)}G`;
  if (size >= 1e6) return `${+(value / 1e6).toFixed(1)}M`;
  if (size >= 1e3) return `${+(value / 1e3).toFixed(1)}k`;
  if (size === 0 || size >= 1) return `${+value.toFixed(2)}`;
  return value.toPrecision(2);
}

/** Indices of values with no value on either side: a line does not show them. */
export function isolatedPoints(column: ReadonlyArray<number | null>): number[] {
  const isolated: number[] = [];
  for (let i = 0; i < column.length; i++) {
    if (column[i] != null && column[i - 1] == null && column[i + 1] == null) isolated.push(i);
  }
  return isolated;
}

/** The lines as uPlot's aligned columns: one x column (seconds) shared by every line, null where a line has no point. */
export function alignLines(lines: ChartLine[]): uPlot.AlignedData {
  const times = [...new Set(lines.flatMap((line) => line.points.map(([time]) => time)))].sort((a, b) => a - b);
  const index = new Map(times.map((time, i) => [time, i]));
  const columns = lines.map((line) => {
    const column = new Array<number | null>(times.length).fill(null);
    for (const [time, value] of line.points) column[index.get(time)!] = value;
    return column;
  });
  return [times.map((time) => time / 1000), ...columns];
}

/** Narrower drags are taken for clicks. */
const MIN_DRAG_PX = 4;

/**
 * uPlot's options for drag to zoom: a drag across the plot selects a span of time, which goes to
 * `onZoom` (the page's range follows it) instead of rescaling the chart in place.
 */
export function dragToZoom(onZoom: (range: TimeRange) => void): Pick<uPlot.Options, 'cursor' | 'hooks'> {
  return {
    cursor: { drag: { x: true, y: false, setScale: false } },
    hooks: {
      setSelect: [(u: uPlot) => {
        const { left, width } = u.select;
        if (width < MIN_DRAG_PX) return;
        const from = Math.floor(u.posToVal(left, 'x') * 1000);
        const to = Math.ceil(u.posToVal(left + width, 'x') * 1000);
        u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
        if (to > from) onZoom({ from, to });
      }],
    },
  };
}

/** The y axis as wide as its longest label (up to 8 px a character at 12 px: "m" is wide), so none is cut. */
export function valueAxis(unit: string): uPlot.Axis {
  return { stroke: '#475569', grid: { stroke: '#eef1f5' }, ticks: { stroke: '#e2e8f0' }, size: (_u, values) => 18 + 8 * Math.max(4, ...(values ?? []).map((v) => v.length)), values: (_u, values) => values.map((value) => `${compactNumber(value)}${unit}`) };
}

/** The time axis of a range `span` ms long, in the user's zone and locale. */
export function timeAxis(span: number): uPlot.Axis {
  return { stroke: '#475569', grid: { stroke: '#eef1f5' }, ticks: { stroke: '#e2e8f0' }, size: 34, space: span > 36 * 3600_000 ? 110 : 70, values: (_u, values) => values.map((value) => formatAxisTime(value * 1000, span)) };
}

/** Draws a chart into `target`, its width following the target's; returns what removes it (an effect's cleanup). */
export function mountChart(options: uPlot.Options, data: uPlot.AlignedData, target: HTMLElement): () => void {
  const chart = new uPlot(options, data, target);
  const resize = new ResizeObserver(() => {
    const width = Math.max(target.clientWidth, 200);
    if (width !== chart.width) chart.setSize({ width, height: options.height });
  });
  resize.observe(target);
  return () => {
    resize.disconnect();
    chart.destroy();
  };
}

interface TimeChartProps {
  lines: ChartLine[];
  range: TimeRange;
  deploys?: DeployMarker[];
  /** Shown after values in the legend and axis, e.g. `/s` or `ms`. */
  unit?: string;
  height?: number;
  testid: string;
  /** Fixed colours per line (the overview keeps received / accepted / refused the same everywhere). */
  colours?: string[];
  /** Where a drag across the chart goes; by default the page's range (time-range.tsx). */
  onZoom?: (range: TimeRange) => void;
}

/** One deploy's verdict: the verdicts of the millisecond it happened at, its service only (one marker, one statement). */
async function judgeDeploy(deploy: DeployMarker) {
  const { verdicts } = await api.deployVerdicts({ from: deploy.time, to: deploy.time + 1, services: [deploy.service] });
  return verdicts[0];
}

export function TimeChart({ lines, range, deploys = [], unit = '', height = 220, testid, colours, onZoom = zoomTo }: TimeChartProps) {
  const holder = useRef<HTMLDivElement>(null);

  useEffect(() => {
    const target = holder.current;
    if (!target) return;
    const format = (value: number | null) => (value === null || value === undefined ? '–' : `${compactNumber(value)}${unit}`);
    const span = range.to - range.from;
    const data = alignLines(lines);
    const options: uPlot.Options = {
      width: Math.max(target.clientWidth, 200),
      height,
      scales: { x: { time: true, range: () => [range.from / 1000, range.to / 1000] } },
      series: [
        // Times in the user's time zone and locale (Intl), not uPlot's English formats.
        { value: (_u: uPlot, value: number | null) => (value === null || value === undefined ? '–' : formatDateTime(value * 1000)) },
        ...lines.map((line, i) => ({
          label: line.label,
          stroke: colours?.[i] ?? PALETTE[i % PALETTE.length],
          width: 1.5,
          // A line draws nothing for a point with no neighbour (one export so far, or gaps
          // around it): those points are drawn as dots.
          points: { show: true, size: 6, filter: (_u: uPlot, seriesIdx: number) => isolatedPoints(data[seriesIdx] as Array<number | null>) },
          value: (_u: uPlot, value: number | null) => format(value),
        })),
      ],
      axes: [timeAxis(span), valueAxis(unit)],
      legend: { live: true },
      ...dragToZoom(onZoom),
      plugins: [deployMarkersPlugin(deploys, judgeDeploy)],
    };
    return mountChart(options, data, target);
  }, [lines, deploys, range.from, range.to, unit, height, colours]);

  return <div class="chart" ref={holder} data-testid={testid} />;
}
