/**
 * OTLP request fixtures for tests that need exact bytes (refusals, faults): built as plain
 * objects and encoded with protobufjs from our proto/ files. Tests of the happy path use the
 * official OpenTelemetry exporters instead.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

const PROTO_ROOT = fileURLToPath(new URL('../proto/', import.meta.url));
let root: protobuf.Root | undefined;

function types(): protobuf.Root {
  if (!root) {
    root = new protobuf.Root();
    root.resolvePath = (_origin, target) => PROTO_ROOT + target.replace(/^.*?opentelemetry\/proto\//, 'opentelemetry/proto/');
    root.loadSync(
      ['trace', 'logs', 'metrics'].map((s) => `opentelemetry/proto/collector/${s}/v1/${s}_service.proto`),
      { keepCase: false },
    );
  }
  return root;
}

/** Encoded request bytes, in a buffer of their own (usable as a fetch body). */
export function encodeTraces(request: object): Uint8Array<ArrayBuffer> {
  const type = types().lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
  return new Uint8Array(type.encode(type.fromObject(request)).finish());
}

export interface TraceRequestOptions {
  spans: number;
  name?: string;
  service?: string;
  /** Start time of span i in Unix nanoseconds; default now + i ns. */
  startNanos?: (i: number) => bigint;
}

/** A request with one resource, one scope and `spans` spans with a few attributes each. */
export function traceRequest({ spans, name = 'op', service = 'fixture', startNanos }: TraceRequestOptions): object {
  const now = BigInt(Date.now()) * 1_000_000n;
  const startOf = startNanos ?? ((i: number) => now + BigInt(i));
  return {
    resourceSpans: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
        scopeSpans: [
          {
            scope: { name: 'fixture-scope', version: '1.0.0' },
            spans: Array.from({ length: spans }, (_, i) => ({
              traceId: randomBytes(16),
              spanId: randomBytes(8),
              name,
              kind: 2,
              startTimeUnixNano: String(startOf(i)),
              endTimeUnixNano: String(startOf(i) + 1_000_000n),
              attributes: [
                { key: 'i', value: { intValue: i } },
                { key: 'http.method', value: { stringValue: 'GET' } },
              ],
            })),
          },
        ],
      },
    ],
  };
}
