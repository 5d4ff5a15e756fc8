/**
 * Logs sent by the official OpenTelemetry exporters over http/protobuf, http/json and grpc land
 * in otel_logs, every field checked against the record the SDK produced.
 */
import { SeverityNumber } from '@opentelemetry/api-logs';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { InMemoryLogRecordExporter, LoggerProvider, SimpleLogRecordProcessor, type ReadableLogRecord } from '@opentelemetry/sdk-logs';
import { TraceFlags, context, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSluice, type TestSluice } from './harness.ts';
import { exportOnce, exporterFor, nanos, PROTOCOLS } from './otel-clients.ts';

let sluice: TestSluice;
beforeAll(async () => {
  sluice = await startTestSluice();
});
afterAll(async () => sluice?.stop());

function produceLogs(service: string): ReadableLogRecord[] {
  const memory = new InMemoryLogRecordExporter();
  const provider = new LoggerProvider({
    resource: resourceFromAttributes({ 'service.name': service, 'deployment.environment': 'test' }),
    processors: [new SimpleLogRecordProcessor({ exporter: memory })],
  });
  const logger = provider.getLogger('billing-logger', '0.9.1');
  const spanContext = { traceId: '5b8efff798038103d269b633813fc60c', spanId: 'eee19b7ec3c1b174', traceFlags: TraceFlags.SAMPLED };
  logger.emit({
    severityNumber: SeverityNumber.ERROR,
    severityText: 'ERROR',
    body: 'payment declined: card expired',
    attributes: { 'user.id': 'u-42', attempt: 3, amount: 12.5, retry: true },
    timestamp: new Date('2026-11-22T10:00:00.123Z'),
    context: trace.setSpanContext(context.active(), spanContext),
  });
  logger.emit({ severityNumber: SeverityNumber.INFO, severityText: 'INFO', body: 'ünïcödé ✓ line', attributes: {} });
  return memory.getFinishedLogRecords();
}

interface LogRow {
  ts: string;
  TraceId: string;
  SpanId: string;
  TraceFlags: number;
  SeverityText: string;
  SeverityNumber: number;
  ServiceName: string;
  Body: string;
  ResourceAttributes: Record<string, string>;
  ScopeName: string;
  ScopeVersion: string;
  LogAttributes: Record<string, string>;
  SourceId: string;
}

describe.each(PROTOCOLS)('logs over %s', (protocol) => {
  it('stores every record with every field', async () => {
    const service = `logs-${protocol.replace(/\W/g, '-')}`;
    const records = produceLogs(service);
    const result = await exportOnce(exporterFor<ReadableLogRecord[]>('logs', protocol, sluice), records);
    expect(result.code, String(result.error)).toBe(0);

    const rows = await sluice.rows<LogRow>(
      `SELECT *, toString(toUnixTimestamp64Nano(Timestamp)) AS ts FROM otel.otel_logs WHERE ServiceName = '${service}' ORDER BY SeverityNumber DESC`,
    );
    expect(rows).toHaveLength(2);
    const [error, info] = rows as [LogRow, LogRow];
    expect(error).toMatchObject({
      SourceId: sluice.sourceId,
      ts: nanos(records[0]!.hrTime),
      TraceId: '5b8efff798038103d269b633813fc60c',
      SpanId: 'eee19b7ec3c1b174',
      TraceFlags: 1,
      SeverityText: 'ERROR',
      SeverityNumber: SeverityNumber.ERROR,
      Body: 'payment declined: card expired',
      ScopeName: 'billing-logger',
      ScopeVersion: '0.9.1',
      LogAttributes: { 'user.id': 'u-42', attempt: '3', amount: '12.5', retry: 'true' },
    });
    expect(error.ResourceAttributes).toMatchObject({ 'service.name': service, 'deployment.environment': 'test' });
    expect(info).toMatchObject({ TraceId: '', SpanId: '', TraceFlags: 0, SeverityText: 'INFO', SeverityNumber: SeverityNumber.INFO, Body: 'ünïcödé ✓ line', LogAttributes: {} });
    expect(info.ts).toBe(nanos(records[1]!.hrTime));
  });
});
