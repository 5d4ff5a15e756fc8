/**
 * Log severities as the console names them: OTLP's severity numbers by the floor of each band
 * (1 trace … 21 fatal). The Logs page filters and labels rows with them; an alert rule on a log
 * count says its least severity with them.
 */
import type { LogEntry } from '../api.ts';

export const SEVERITIES: Array<[number, string]> = [[1, 'trace'], [5, 'debug'], [9, 'info'], [13, 'warn'], [17, 'error'], [21, 'fatal']];

export function severityName(entry: Pick<LogEntry, 'severityNumber' | 'severityText'>): string {
  if (entry.severityText) return entry.severityText.toLowerCase();
  const found = [...SEVERITIES].reverse().find(([floor]) => entry.severityNumber >= floor);
  return found?.[1] ?? 'unset';
}
