/**
 * The server side of the NATS client protocol, read from a byte stream: what NatsDirect needs
 * (INFO, MSG, HMSG, PING, PONG, +OK, -ERR). Written for bulk payloads: each payload goes into a
 * buffer of the size the server announced, copied once from whatever chunk the socket delivered
 * (the parser keeps no reference to it) or, for the rest of a large one, read there by the
 * socket itself (payloadRest). Control lines are short and decoded as latin1.
 */

/** A delivered message: its header block parsed (HMSG) and its payload after the headers. */
export interface NatsMessage {
  subject: string;
  /** The subscription it came through (a JetStream pull's messages keep their own subjects). */
  sid: number;
  reply: string | undefined;
  headers: MessageHeaders | undefined;
  data: Buffer;
}

export interface ProtocolEvents {
  info(info: Record<string, unknown>): void;
  message(message: NatsMessage): void;
  ping(): void;
  pong(): void;
  /** The server's -ERR text (without quotes). */
  error(text: string): void;
}

/** Longest control line accepted: a server sends far shorter ones (INFO is the longest). */
const MAX_CONTROL_LINE = 64 * 1024;
/** Largest payload accepted: nats-server's max_payload cannot exceed 64 MiB. */
const MAX_PAYLOAD = 64 * 1024 * 1024;
/** A payload's rest at least this long is offered to the socket to read in place. */
const IN_PLACE_BYTES = 32 * 1024;

const LF = 10;
const CR = 13;

export class ProtocolError extends Error {}

/** Parses the server's byte stream; call push() with every chunk read, in order. */
export class NatsProtocolParser {
  /** A control line split across chunks, gathered until its LF. */
  private pendingLine: Buffer | undefined;
  /** The message whose payload is being copied. */
  private reading: { subject: string; sid: number; reply: string | undefined; headerBytes: number; payload: Buffer; filled: number } | undefined;
  /** Bytes to skip: the CRLF after a payload. */
  private skip = 0;

  constructor(
    private readonly events: ProtocolEvents,
    /** Memory for a payload of the size the server announced (a pool's: payload-pool.ts). */
    private readonly allocate: (size: number) => Buffer = Buffer.allocUnsafe,
  ) {}

  /** Reads a chunk; nothing of it is kept once this returns. Throws ProtocolError on a malformed stream. */
  push(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.length) {
      const reading = this.reading;
      if (reading) {
        const n = Math.min(reading.payload.length - reading.filled, chunk.length - at);
        reading.payload.set(chunk.subarray(at, at + n), reading.filled);
        reading.filled += n;
        at += n;
        if (reading.filled === reading.payload.length) this.deliver(reading);
        continue;
      }
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.length - at);
        this.skip -= n;
        at += n;
        continue;
      }
      const lf = chunk.indexOf(LF, at);
      if (lf < 0) {
        this.keepPartialLine(chunk.subarray(at));
        return;
      }
      let line = chunk.subarray(at, lf);
      at = lf + 1;
      if (this.pendingLine) {
        line = Buffer.concat([this.pendingLine, line]);
        this.pendingLine = undefined;
      }
      const end = line[line.length - 1] === CR ? line.length - 1 : line.length;
      this.controlLine(Buffer.from(line.buffer, line.byteOffset, end).toString('latin1'));
    }
  }

  /**
   * Where the socket may put its next read: the unfilled rest of the payload being read, when
   * at least IN_PLACE_BYTES are left (the kernel then copies them to their place, and this
   * parser does not copy them again); undefined when the next bytes should come through push().
   * Report a read into it with filledInPlace().
   */
  payloadRest(): Buffer | undefined {
    const reading = this.reading;
    if (!reading || reading.payload.length - reading.filled < IN_PLACE_BYTES) return undefined;
    return reading.payload.subarray(reading.filled);
  }

  /** Counts `n` bytes the socket read into the buffer payloadRest() gave. */
  filledInPlace(n: number): void {
    const reading = this.reading;
    if (!reading || reading.filled + n > reading.payload.length) throw new ProtocolError('bytes read in place outside a payload');
    reading.filled += n;
    if (reading.filled === reading.payload.length) this.deliver(reading);
  }

  private keepPartialLine(rest: Uint8Array): void {
    const kept = (this.pendingLine?.length ?? 0) + rest.length;
    if (kept > MAX_CONTROL_LINE) throw new ProtocolError(`a control line longer than ${MAX_CONTROL_LINE} bytes`);
    this.pendingLine = this.pendingLine ? Buffer.concat([this.pendingLine, rest]) : Buffer.from(rest);
  }

  private controlLine(line: string): void {
    const space = line.indexOf(' ');
    const op = (space < 0 ? line : line.slice(0, space)).toUpperCase();
    const args = space < 0 ? '' : line.slice(space + 1).trim();
    switch (op) {
      case 'MSG':
        return this.startMessage(args, false);
      case 'HMSG':
        return this.startMessage(args, true);
      case 'PING':
        return this.events.ping();
      case 'PONG':
        return this.events.pong();
      case '+OK':
        return;
      case '-ERR':
        return this.events.error(args.replace(/^'|'$/g, ''));
      case 'INFO':
        return this.events.info(parseInfo(args));
      default:
        throw new ProtocolError(`unknown operation ${JSON.stringify(op.slice(0, 16))}`);
    }
  }

  /** MSG <subject> <sid> [reply] <bytes>; HMSG <subject> <sid> [reply] <header bytes> <bytes>. */
  private startMessage(args: string, withHeaders: boolean): void {
    const fields = args.split(' ').filter((field) => field.length > 0);
    const counts = withHeaders ? 2 : 1;
    if (fields.length !== 2 + counts && fields.length !== 3 + counts) throw new ProtocolError(`malformed ${withHeaders ? 'HMSG' : 'MSG'} line`);
    const total = sizeOf(fields[fields.length - 1]!);
    const headerBytes = withHeaders ? sizeOf(fields[fields.length - 2]!) : 0;
    if (headerBytes > total) throw new ProtocolError('HMSG header bytes exceed the total');
    const reply = fields.length === 3 + counts ? fields[2] : undefined;
    // Not cleared: every byte is written by the copy before anyone reads it.
    this.reading = { subject: fields[0]!, sid: Number(fields[1]), reply, headerBytes, payload: this.allocate(total), filled: 0 };
    if (total === 0) this.deliver(this.reading);
  }

  private deliver(reading: NonNullable<NatsProtocolParser['reading']>): void {
    this.reading = undefined;
    this.skip = 2;
    const { subject, sid, reply, headerBytes, payload } = reading;
    const headers = headerBytes > 0 ? MessageHeaders.parse(payload.toString('utf8', 0, headerBytes)) : undefined;
    this.events.message({ subject, sid, reply, headers, data: headerBytes > 0 ? payload.subarray(headerBytes) : payload });
  }
}

function sizeOf(field: string): number {
  const n = Number(field);
  if (!/^\d+$/.test(field) || n > MAX_PAYLOAD) throw new ProtocolError(`bad size ${JSON.stringify(field.slice(0, 16))}`);
  return n;
}

function parseInfo(json: string): Record<string, unknown> {
  try {
    const info = JSON.parse(json);
    if (info && typeof info === 'object') return info;
  } catch {
    // fall through
  }
  throw new ProtocolError('INFO is not a JSON object');
}

/**
 * A message's header block: `NATS/1.0[ <status> <description>]` then `Name: value` lines.
 * JetStream says how a pull ended with a status (404, 408, 409...) and no payload.
 */
export class MessageHeaders implements Iterable<[string, string[]]> {
  private readonly byName = new Map<string, { name: string; values: string[] }>();

  private constructor(
    readonly status: number | undefined,
    readonly description: string,
  ) {}

  static parse(block: string): MessageHeaders {
    const lines = block.split('\r\n');
    const first = /^NATS\/1\.0(?: (\d{3})(?: (.*))?)?$/.exec(lines[0]!.trim());
    if (!first) throw new ProtocolError('a header block without NATS/1.0');
    const headers = new MessageHeaders(first[1] ? Number(first[1]) : undefined, first[2]?.trim() ?? '');
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue; // the blank lines that end the block
      headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
    }
    return headers;
  }

  /** The first value of a header (names compare case-insensitively), or '' as nats.js answers. */
  get(name: string): string {
    return this.byName.get(name.toLowerCase())?.values[0] ?? '';
  }

  *[Symbol.iterator](): Iterator<[string, string[]]> {
    for (const { name, values } of this.byName.values()) yield [name, values];
  }

  private append(name: string, value: string): void {
    const key = name.toLowerCase();
    const entry = this.byName.get(key);
    if (entry) entry.values.push(value);
    else this.byName.set(key, { name, values: [value] });
  }
}
