/**
 * OTLP/gRPC by hand over node:http2, for what no real client does: a message declared and
 * never finished, a connection that never speaks HTTP/2, or speaks it and then nothing. Used by
 * test/grpc-hostile.test.ts, bench/hostile-grpc.ts and the soak's bench/hostile-clients.ts (loopback only).
 */
import { connect, type ClientHttp2Session } from 'node:http2';
import { connect as connectTcp, type Socket } from 'node:net';

export const TRACES_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

/** The HTTP/2 client connection preface: the magic octets, then an empty SETTINGS frame. */
export const H2_PREFACE = Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), Buffer.from([0, 0, 0, 0x4, 0, 0, 0, 0, 0])]);

/** What the client of one call saw. */
export interface CallOutcome {
  /** grpc-status, undefined when the stream ended without one. */
  status: number | undefined;
  /** The RST_STREAM code the stream ended with (0 also when it ended normally). */
  rstCode: number | undefined;
  /** The status carried grpc-status-details-bin (RetryInfo). */
  details: boolean;
  /** Message bytes the client got to hand to its stream. */
  sent: number;
  /** When the stream closed (Date.now()). */
  closedAt: number;
}

const ZEROS = Buffer.alloc(64 * 1024);

/** An HTTP/2 connection (prior knowledge, cleartext) whose errors end its calls instead of the process. */
export function h2Connect(address: string): ClientHttp2Session {
  const session = connect(`http://${address}`);
  session.on('error', () => {});
  return session;
}

/** An Export call's stream and what its client sees of the answer; `closed` resolves when the stream closed, whoever closed it. */
function openCall(session: ClientHttp2Session, headers: Record<string, string>) {
  const stream = session.request({ ':method': 'POST', ':path': TRACES_PATH, 'content-type': 'application/grpc', te: 'trailers', ...headers });
  const outcome: CallOutcome = { status: undefined, rstCode: undefined, details: false, sent: 0, closedAt: 0 };
  const read = (fields: Record<string, unknown>) => {
    if (fields['grpc-status'] !== undefined) outcome.status = Number(fields['grpc-status']);
    if (fields['grpc-status-details-bin'] !== undefined) outcome.details = true;
  };
  stream.on('response', read).on('trailers', read).on('error', () => {});
  // Reading the answer lets the stream close.
  stream.resume();
  const closed = new Promise<CallOutcome>((resolve) => {
    stream.once('close', () => resolve({ ...outcome, rstCode: stream.rstCode, closedAt: Date.now() }));
  });
  return { stream, outcome, closed };
}

function prefix(length: number, compressed = false): Buffer {
  const bytes = Buffer.alloc(5);
  bytes.writeUInt8(compressed ? 1 : 0, 0);
  bytes.writeUInt32BE(length, 1);
  return bytes;
}

/**
 * An Export call declaring a message of `declared` bytes (zeros) and sending `send` of them, as
 * fast as flow control lets it; the stream is ended only when the whole message was sent.
 */
export function partialCall(session: ClientHttp2Session, options: { apiKey?: string; declared: number; send: number }): Promise<CallOutcome> {
  const { stream, outcome, closed } = openCall(session, options.apiKey ? { 'x-api-key': options.apiKey } : {});
  void (async () => {
    stream.write(prefix(options.declared));
    while (outcome.sent < options.send && !stream.closed && !stream.destroyed) {
      const bytes = Math.min(ZEROS.length, options.send - outcome.sent);
      outcome.sent += bytes;
      if (!stream.write(ZEROS.subarray(0, bytes))) await Promise.race([new Promise((resolve) => stream.once('drain', resolve)), closed]);
    }
    if (options.send >= options.declared && !stream.closed) stream.end();
  })();
  return closed;
}

/** A whole call: `message` with the compressed flag set when a grpc-encoding is given. */
export function unaryCall(session: ClientHttp2Session, message: Uint8Array, headers: Record<string, string>): Promise<CallOutcome> {
  const { stream, outcome, closed } = openCall(session, headers);
  stream.end(Buffer.concat([prefix(message.byteLength, headers['grpc-encoding'] !== undefined), message]));
  outcome.sent = message.byteLength;
  return closed;
}

export interface SilentConnection {
  socket: Socket;
  /** The server sent something (its SETTINGS): it took the connection. */
  heard: Promise<void>;
  /** When the server closed it (Date.now()). */
  closed: Promise<number>;
}

/** A TCP connection that sends `bytes` (nothing by default) and then stays silent, never closing its side first. */
export function silentConnection(port: number, bytes?: Buffer): SilentConnection {
  const socket = connectTcp({ host: '127.0.0.1', port, allowHalfOpen: true });
  socket.on('error', () => {});
  if (bytes) socket.write(bytes);
  const heard = new Promise<void>((resolve) => socket.once('data', () => resolve()));
  const closed = new Promise<number>((resolve) => socket.once('end', () => resolve(Date.now())).once('close', () => resolve(Date.now())));
  // What the server sends (SETTINGS, GOAWAY) is read and dropped.
  socket.resume();
  return { socket, heard, closed };
}
