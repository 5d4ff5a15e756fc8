import { describe, expect, it } from 'vitest';
import { NatsProtocolParser, ProtocolError, type NatsMessage } from './nats-protocol.ts';

function collect() {
  const events: unknown[] = [];
  const parser = new NatsProtocolParser({
    info: (info) => events.push(['info', info]),
    message: (m: NatsMessage) =>
      events.push(['message', m.subject, m.sid, m.reply, m.headers ? [m.headers.status, m.headers.description, [...m.headers]] : undefined, m.data.toString('latin1')]),
    ping: () => events.push(['ping']),
    pong: () => events.push(['pong']),
    error: (text) => events.push(['error', text]),
  });
  return { events, parser };
}

const headerBlock = 'NATS/1.0\r\nSluice-Rows: 2\r\nSluice-Columns: a,b\r\nX: 1\r\nx: 2\r\n\r\n';
const statusBlock = 'NATS/1.0 408 Request Timeout\r\n\r\n';
const payload = 'rows\r\nwith CRLF and MSG inside';
const stream = Buffer.from(
  'INFO {"max_payload":1048576}\r\n' +
    `MSG orders 7 $JS.ACK.S.d.1.5.5.1.0 ${payload.length}\r\n${payload}\r\n` +
    'PING\r\n' +
    `HMSG rows 9 reply.to ${headerBlock.length} ${headerBlock.length + 3}\r\n${headerBlock}abc\r\n` +
    `HMSG _INBOX.x.pull.3 3 ${statusBlock.length} ${statusBlock.length}\r\n${statusBlock}\r\n` +
    'MSG empty 1 0\r\n\r\n' +
    "+OK\r\nPONG\r\n-ERR 'Authorization Violation'\r\n",
  'latin1',
);

describe('NatsProtocolParser', () => {
  it('reads every operation the puller needs, whole or split at any byte', () => {
    const whole = collect();
    whole.parser.push(stream);
    expect(whole.events).toEqual([
      ['info', { max_payload: 1048576 }],
      ['message', 'orders', 7, '$JS.ACK.S.d.1.5.5.1.0', undefined, payload],
      ['ping'],
      ['message', 'rows', 9, 'reply.to', [undefined, '', [['Sluice-Rows', ['2']], ['Sluice-Columns', ['a,b']], ['X', ['1', '2']]]], 'abc'],
      ['message', '_INBOX.x.pull.3', 3, undefined, [408, 'Request Timeout', []], ''],
      ['message', 'empty', 1, undefined, undefined, ''],
      ['pong'],
      ['error', 'Authorization Violation'],
    ]);
    for (let cut = 1; cut < stream.length; cut++) {
      const split = collect();
      split.parser.push(stream.subarray(0, cut));
      split.parser.push(stream.subarray(cut));
      expect(split.events, `cut at ${cut}`).toEqual(whole.events);
    }
    const bytewise = collect();
    for (let i = 0; i < stream.length; i++) bytewise.parser.push(stream.subarray(i, i + 1));
    expect(bytewise.events).toEqual(whole.events);
  });

  it('copies payloads: the chunk read may be reused at once', () => {
    const seen: Buffer[] = [];
    const parser = new NatsProtocolParser({ info() {}, message: (m) => seen.push(m.data), ping() {}, pong() {}, error() {} });
    const chunk = Buffer.from('MSG s 1 4\r\nabcd\r\n');
    parser.push(chunk);
    chunk.fill(0);
    expect(seen.map((b) => b.toString())).toEqual(['abcd']);
  });

  it('lets the socket read the rest of a large payload in place, and reads the same messages', () => {
    // A socket as NatsDirect drives one: each read goes where payloadRest() says, else to the
    // parser's push(); reads return at most `chunk` bytes (what the kernel had).
    const big = (n: number, seed: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff));
    const large = [big(200_000, 1), big(32 * 1024, 2), big(32 * 1024 + 1, 3), big(1024 * 1024, 4)];
    const wire = Buffer.concat([
      Buffer.from('INFO {}\r\n'),
      ...large.flatMap((p, i) => [Buffer.from(i % 2 ? `HMSG s${i} ${i} r ${headerBlock.length} ${headerBlock.length + p.length}\r\n${headerBlock}` : `MSG s${i} ${i} ${p.length}\r\n`), p, Buffer.from('\r\nPING\r\n')]),
      Buffer.from(`MSG small 9 ${payload.length}\r\n${payload}\r\n`),
    ]);
    const whole = collect();
    whole.parser.push(wire);
    expect(whole.events).toHaveLength(1 + 2 * large.length + 1);
    for (const chunk of [1000, 4096, 65_536, 256 * 1024, 1_000_003]) {
      const { events, parser } = collect();
      let inPlace = 0;
      for (let at = 0; at < wire.length;) {
        const rest = parser.payloadRest();
        const n = Math.min(chunk, wire.length - at, rest?.length ?? Infinity);
        if (rest) {
          wire.copy(rest, 0, at, at + n);
          parser.filledInPlace(n);
          inPlace += n;
        } else parser.push(wire.subarray(at, at + n));
        at += n;
      }
      expect(events, `reads of ${chunk} bytes`).toEqual(whole.events);
      // What a read left of each large payload, down to the last 32 KiB, came in place.
      expect(inPlace, `reads of ${chunk} bytes`).toBeGreaterThan(chunk >= 200_000 ? 0 : 1_000_000);
    }
    // Never past the payload, and not outside one.
    const { parser } = collect();
    parser.push(Buffer.from('MSG s 1 100000\r\n'));
    expect(parser.payloadRest()!.length).toBe(100_000);
    expect(() => parser.filledInPlace(100_001)).toThrow(ProtocolError);
    parser.filledInPlace(100_000);
    expect(parser.payloadRest()).toBeUndefined();
    expect(() => parser.filledInPlace(1)).toThrow(ProtocolError);
  });

  it('headers are looked up case-insensitively; a missing one reads as empty', () => {
    let headers: NatsMessage['headers'];
    const parser = new NatsProtocolParser({ info() {}, message: (m) => (headers = m.headers), ping() {}, pong() {}, error() {} });
    parser.push(Buffer.from(`HMSG s 1 ${headerBlock.length} ${headerBlock.length}\r\n${headerBlock}\r\n`));
    expect([headers!.get('sluice-rows'), headers!.get('SLUICE-COLUMNS'), headers!.get('x'), headers!.get('absent')]).toEqual(['2', 'a,b', '1', '']);
  });

  it.each([
    ['an unknown operation', 'HELLO there\r\n'],
    ['a size that is not a number', 'MSG s 1 12x\r\n'],
    ['a size past 64 MiB', `MSG s 1 ${64 * 1024 * 1024 + 1}\r\n`],
    ['a MSG line with too few fields', 'MSG s 4\r\n'],
    ['header bytes past the total', 'HMSG s 1 10 4\r\n'],
    ['a header block without NATS/1.0', 'HMSG s 1 6 6\r\nHTTP/1\r\n'],
    ['INFO that is not JSON', 'INFO {nope\r\n'],
    ['a control line without end', 'X'.repeat(70 * 1024)],
  ])('refuses %s', (_, bytes) => {
    const { parser } = collect();
    expect(() => parser.push(Buffer.from(bytes))).toThrow(ProtocolError);
  });
});
