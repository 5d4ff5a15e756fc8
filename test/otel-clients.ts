/**
 * The official OpenTelemetry JS exporters, one per protocol (http/protobuf, http/json, grpc),
 * pointed at a test server, and a promise around their export() callback.
 */
import { Metadata } from '@grpc/grpc-js';
import { OTLPLogExporter as LogsGrpc } from '@opentelemetry/exporter-logs-otlp-grpc';
import { OTLPLogExporter as LogsJson } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPLogExporter as LogsProto } from '@opentelemetry/exporter-logs-otlp-proto';
import { OTLPMetricExporter as MetricsGrpc } from '@opentelemetry/exporter-metrics-otlp-grpc';
import { OTLPMetricExporter as MetricsJson } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as MetricsProto } from '@opentelemetry/exporter-metrics-otlp-proto';
import { OTLPTraceExporter as TracesGrpc } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as TracesJson } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as TracesProto } from '@opentelemetry/exporter-trace-otlp-proto';
import type { ExportResult } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

export type Protocol = 'http/protobuf' | 'http/json' | 'grpc';
export const PROTOCOLS: Protocol[] = ['http/protobuf', 'http/json', 'grpc'];

export interface Target {
  baseUrl: string;
  grpcAddress: string;
  apiKey: string;
}

interface Exporter<T> {
  export(items: T, done: (result: ExportResult) => void): void;
  shutdown(): Promise<void>;
}

function options(target: Target, protocol: Protocol, path: string) {
  if (protocol === 'grpc') {
    const metadata = new Metadata();
    metadata.set('x-api-key', target.apiKey);
    return { url: `http://${target.grpcAddress}`, metadata };
  }
  return { url: target.baseUrl + path, headers: { 'x-api-key': target.apiKey } };
}

const CLASSES = {
  traces: { 'http/protobuf': TracesProto, 'http/json': TracesJson, grpc: TracesGrpc },
  logs: { 'http/protobuf': LogsProto, 'http/json': LogsJson, grpc: LogsGrpc },
  metrics: { 'http/protobuf': MetricsProto, 'http/json': MetricsJson, grpc: MetricsGrpc },
} as const;

export function exporterFor<T>(signal: keyof typeof CLASSES, protocol: Protocol, target: Target): Exporter<T> {
  const Class = CLASSES[signal][protocol] as unknown as new (config: object) => Exporter<T>;
  return new Class(options(target, protocol, `/v1/${signal}`));
}

/** Exports once and resolves with the exporter's result (code 0 = success). */
export async function exportOnce<T>(exporter: Exporter<T>, items: T): Promise<ExportResult> {
  try {
    return await new Promise<ExportResult>((resolve) => exporter.export(items, resolve));
  } finally {
    await exporter.shutdown();
  }
}

/** An SDK HrTime as exact decimal nanoseconds (a JS number would lose the last digits). */
export function nanos([seconds, nanoseconds]: [number, number]): string {
  return String(BigInt(seconds) * 1_000_000_000n + BigInt(nanoseconds));
}

/** `count` ended spans of `service`, made by the official SDK, ready for a trace exporter. */
export function finishedSpans(service: string, count: number): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': service }), spanProcessors: [new SimpleSpanProcessor(memory)] });
  const tracer = provider.getTracer('sluice-tests');
  for (let i = 0; i < count; i++) tracer.startSpan(`op-${i}`).end();
  return memory.getFinishedSpans();
}

/** A metric reader the test collects from when it wants (no export interval). */
export class ManualReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}
