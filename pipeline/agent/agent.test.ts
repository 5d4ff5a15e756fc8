import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import { transcodeAgent } from './rows.ts';
import { MAX_BATCH_ENTRIES, validateAgentPayload } from './schemas.ts';
import { parseTimestamp } from './time.ts';

const RECEIVED = 1_795_000_000_000_000_000n;
const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

function varint(value: number): number[] {
  const bytes: number[] = [];
  for (; value >= 0x80; value >>>= 7) bytes.push((value & 0x7f) | 0x80);
  bytes.push(value);
  return bytes;
}

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SluiceError);
    expect((err as SluiceError).code).toBe('bad_request');
    return (err as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('agent timestamps', () => {
  it('reads RFC 3339 to the nanosecond, with offsets', () => {
    expect(parseTimestamp('2026-11-22T10:00:00.123456789Z')).toBe(1_795_341_600_123_456_789n);
    expect(parseTimestamp('2026-11-22T11:00:00.5+01:00')).toBe(1_795_341_600_500_000_000n);
    expect(parseTimestamp('2026-11-22T04:30:00-05:30')).toBe(1_795_341_600_000_000_000n);
  });

  it('reads epoch nanoseconds as digits or an integer', () => {
    expect(parseTimestamp('1795341600123456789')).toBe(1_795_341_600_123_456_789n);
    expect(parseTimestamp(1_795_341_600_000_000_000)).toBe(1_795_341_600_000_000_000n);
  });

  it('refuses seconds, milliseconds, impossible dates and junk', () => {
    for (const bad of [1795341600, '1795341600000', '2026-02-30T00:00:00Z', '2026-11-22', '2026-11-22T10:00:00', 'yesterday', 1795341600.5, '2026-11-22T25:00:00Z']) {
      expect(parseTimestamp(bad as string | number), String(bad)).toBeUndefined();
    }
  });

  it('reads every timestamp as the regular expression and Date.parse reading did', () => {
    // Near misses of each field, calendar edges, range edges and random times, against the
    // straightforward reading the character walk replaced.
    const samples: Array<string | number> = [
      '2024-02-29T00:00:00Z', '2026-02-29T00:00:00Z', '2000-02-29T12:00:00Z', '2100-02-29T12:00:00Z', '2026-04-31T00:00:00Z',
      '2026-12-31T23:59:59.999999999Z', '2026-01-01T24:00:00Z', '2026-01-01T23:60:00Z', '2026-01-01T23:59:60Z',
      '2026-13-01T00:00:00Z', '2026-00-10T00:00:00Z', '2026-01-00T00:00:00Z', '2026-01-01t00:00:00z', '2026-01-01 00:00:00Z',
      '2026-01-01T00:00:00+23:59', '2026-01-01T00:00:00+24:00', '2026-01-01T00:00:00-00:00', '2026-01-01T00:00:00+00:60',
      '2026-01-01T00:00:00.Z', '2026-01-01T00:00:00.1234567890Z', '2026-01-01T00:00:00.1Z', '2026-01-01T00:00:00.000000001+05:30',
      '2026-01-01T00:00:00Z ', ' 2026-01-01T00:00:00Z', '2026-01-01T00:00:00+0100', '2026-1-01T00:00:00Z', '20260-01-01T00:00:00Z',
      '20x6-01-01T00:00:00Z', 'x026-01-01T00:00:00Z', '2026-0x-01T00:00:00Z', '2026-01-0xT00:00:00Z', '2026-01-01T0x:00:00Z',
      '2026-01-01T00:x0:00Z', '2026-01-01T00:00:0xZ', '2026-01-01T00:00:00+0x:00', '2026-01-01T00:00:00+00:0x', '2026-01-01T00:00:00+00:',
      '2026-01-01T00:00:00.12x4Z', '2026-01-01T00:00:00.Z', '2026/01/01T00:00:00Z', '2026-01-01T00-00:00Z',
      '1973-03-03T09:46:39.999999999Z', '1973-03-03T09:46:40Z', '2262-04-11T23:47:16.854775807Z', '2262-04-11T23:47:16.854775808Z',
      '0050-01-01T00:00:00Z', '9999-12-31T23:59:59Z', '1970-01-01T00:00:00Z',
      '100000000000000000', '99999999999999999', '9223372036854775807', '9223372036854775808', '9999999999999999999',
      '1', '', '12345678901234567890', '１７９５３４１６００１２３４５６７８９', '1795341600123456789x',
      1e17, 1e17 - 1, 9.2e18, 9.3e18, 2 ** 63, 1_795_341_600_123_456_800, -1, 0,
    ];
    let seed = 12345;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const two = (n: number) => String(n).padStart(2, '0');
    for (let i = 0; i < 3000; i++) {
      const year = 1960 + Math.floor(random() * 320);
      const fraction = random() < 0.5 ? '' : `.${String(Math.floor(random() * 1e9)).slice(0, 1 + Math.floor(random() * 9))}`;
      const zone = random() < 0.5 ? 'Z' : `${random() < 0.5 ? '+' : '-'}${two(Math.floor(random() * 25))}:${two(Math.floor(random() * 61))}`;
      samples.push(`${year}-${two(1 + Math.floor(random() * 13))}-${two(Math.floor(random() * 32))}T${two(Math.floor(random() * 25))}:${two(Math.floor(random() * 61))}:${two(Math.floor(random() * 61))}${fraction}${zone}`);
    }
    // Each of those with one character replaced, removed or doubled.
    const noise = '0123456789-:.TtZz+ x９';
    for (let i = 0; i < 3000; i++) {
      const base = String(samples[Math.floor(random() * samples.length)]);
      const at = Math.floor(random() * base.length);
      const change = Math.floor(random() * 3);
      const char = noise[Math.floor(random() * noise.length)]!;
      samples.push(base.slice(0, at) + (change === 0 ? char : change === 1 ? '' : base[at]! + base[at]!) + base.slice(at + 1));
    }
    for (const sample of samples) expect(parseTimestamp(sample), String(sample)).toBe(referenceTimestamp(sample));
  });
});

/** The reading parseTimestamp had before it walked the characters itself: the oracle. */
function referenceTimestamp(value: string | number): bigint | undefined {
  const RFC3339 = /^(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;
  let nanos: bigint;
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) return undefined;
    nanos = BigInt(value);
  } else if (/^\d{1,19}$/.test(value)) {
    nanos = BigInt(value);
  } else {
    const match = RFC3339.exec(value);
    if (!match) return undefined;
    const [, dateTime, fraction = '', offset] = match;
    const millis = Date.parse(`${dateTime!.replace(/[t ]/, 'T')}${offset!.toUpperCase()}`);
    if (Number.isNaN(millis)) return undefined;
    const sign = offset!.startsWith('-') ? -1 : 1;
    const offsetMinutes = offset!.length === 1 ? 0 : sign * (Number(offset!.slice(1, 3)) * 60 + Number(offset!.slice(4)));
    const local = new Date(millis + offsetMinutes * 60_000).toISOString();
    if (local.slice(0, 10) !== dateTime!.slice(0, 10) || local.slice(11, 19) !== dateTime!.slice(11, 19)) return undefined;
    nanos = BigInt(millis) * 1_000_000n + BigInt(fraction.padEnd(9, '0'));
  }
  return nanos >= 100_000_000_000_000_000n && nanos <= 9_223_372_036_854_775_807n ? nanos : undefined;
}

describe('agent payload validation', () => {
  it('names the first bad field with its index', () => {
    const entries = [{ message: 'ok' }, { message: 'ok', level: 7 }, { level: 'info' }];
    expect(refusal(() => validateAgentPayload('logs', { entries }))).toBe('entries[1].level: must be string');
    expect(refusal(() => validateAgentPayload('logs', { entries: [{ message: 'a' }, { level: 'x' }] }))).toBe('entries[1].message: is required');
    expect(refusal(() => validateAgentPayload('logs', { entries: [{ message: 'a', timestamp: 1700000000 }] }))).toBe(
      'entries[0].timestamp: must be RFC 3339 or epoch nanoseconds',
    );
    expect(refusal(() => validateAgentPayload('logs', { entries: [{ message: 'a', mesage: 'typo' }] }))).toBe(
      'entries[0].mesage: is not a known field (put free-form data in attributes)',
    );
    expect(refusal(() => validateAgentPayload('metrics', { metrics: [{ name: 'm', value: 1, type: 'histogram' }] }))).toBe(
      'metrics[0].type: must be one of gauge, counter',
    );
    expect(refusal(() => validateAgentPayload('metrics', { metrics: [{ name: 'm', value: '1' }] }))).toBe('metrics[0].value: must be number');
    expect(refusal(() => validateAgentPayload('heartbeat', { version: '1' }))).toBe('agentId: is required');
    expect(refusal(() => validateAgentPayload('deploy', { service: 's', version: '1', url: 'javascript:alert(1)' }))).toBe('url: must match ^https?://');
    expect(refusal(() => validateAgentPayload('logs', [{ message: 'a' }]))).toBe('body: must be object');
    expect(refusal(() => validateAgentPayload('logs', { entries: [{ message: 'a', attributes: { '': 'v' } }] }))).toBe(
      'entries[0].attributes[""]: key must NOT have fewer than 1 characters',
    );
    expect(refusal(() => validateAgentPayload('logs', { entries: [{ message: 'a', attributes: { k: { nested: true } } }] }))).toBe(
      'entries[0].attributes.k: must be string,number,boolean',
    );
  });

  it('refuses a batch over the cap by its size, before looking at entries', () => {
    const entries = Array.from({ length: MAX_BATCH_ENTRIES + 1 }, () => ({}));
    expect(refusal(() => validateAgentPayload('logs', { entries }))).toBe(
      'batch has 10001 entries; the limit is 10000 per request (nothing was stored)',
    );
    expect(refusal(() => validateAgentPayload('metrics', { metrics: Array.from({ length: 10_001 }, () => ({})) }))).toContain('the limit is 10000');
  });
});

describe('agent rows', () => {
  it('refuses a batch whose entries fall on more than 100 days (the tables are partitioned by day), takes 100', () => {
    const day = 86_400_000_000_000n;
    const batch = (days: number) => ({ entries: Array.from({ length: 300 }, (_, i) => ({ message: 'x', timestamp: String(RECEIVED - BigInt(i % days) * day) })) });
    expect(refusal(() => transcodeAgent('logs', encode(batch(101)), 'src', Infinity, RECEIVED))).toBe(
      'rows span 101 days; one request may span at most 100 days per table (the storage partitions agent_logs by the day of Timestamp, UTC): send them in several requests',
    );
    expect(transcodeAgent('logs', encode(batch(100)), 'src', Infinity, RECEIVED).accepted).toBe(300);
    const points = { metrics: Array.from({ length: 150 }, (_, i) => ({ name: 'm', value: i, timestamp: String(RECEIVED - BigInt(i) * day) })) };
    expect(refusal(() => transcodeAgent('metrics', encode(points), 'src', Infinity, RECEIVED))).toMatch(/^rows span 150 days; .* agent_metrics by the day of Timestamp/);
  });

  it('writes one row per entry, batch defaults overlaid by the entry', () => {
    const batch = {
      host: 'web-1',
      service: 'api',
      attributes: { region: 'eu', tier: 1 },
      entries: [
        { message: 'a', level: 'WARNING', attributes: { tier: 2 } },
        { message: 'b', host: 'web-2', timestamp: '2026-11-22T10:00:00Z' },
      ],
    };
    const result = transcodeAgent('logs', encode(batch), 'src', Infinity, RECEIVED);
    expect(result.accepted).toBe(2);
    expect(result.tables).toHaveLength(1);
    expect(result.tables[0]).toMatchObject({ table: 'agent_logs', rows: 2 });
    const text = Buffer.from(result.tables[0]!.data).toString('latin1');
    for (const value of ['web-1', 'web-2', 'api', 'warn', 'region', 'eu', 'tier']) expect(text).toContain(value);
  });

  it('writes exactly the bytes of a plain encoding: text of any kind, numbers as String() writes them, every timestamp form', () => {
    const texts = ['', 'plain', 'x'.repeat(127), 'y'.repeat(128), 'z'.repeat(256), 'w'.repeat(257), 'ünïcödé ✓', `${'a'.repeat(200)}é`, '🎉 party', 'lone \ud800 surrogate', 'nul\u0000byte'];
    const values = [0, -0, 7, 127, 128, 2 ** 31, 2 ** 53 - 1, 2 ** 53, -1, -(2 ** 40), 1.5, -0.25, 1e21, 1e-7, 123456789.123, true, false, 'text', 'ö'];
    const timestamps = [undefined, '2026-11-22T10:00:00.123456789Z', '2026-11-22T11:00:00+01:00', '1795341600123456789', 1_795_341_600_000_000_000, '2262-04-11T23:47:16.854775807Z'];
    const levels = [undefined, 'INFO', 'Warning', 'err', 'custom', 'constructor', '__proto__', 'toString', 'ÉRROR'];
    const entries = texts.map((message, i) => ({
      message,
      timestamp: timestamps[i % timestamps.length],
      level: levels[i % levels.length],
      ...(i % 3 === 0 ? { host: texts[(i + 1) % texts.length]!.slice(0, 255) } : {}),
      attributes: Object.fromEntries(values.map((value, k) => [`k${k}${texts[(i + k) % texts.length]!.slice(0, 20)}`, value])),
    }));
    const batch = { host: 'höst', service: 's'.repeat(130), attributes: { shared: 1, k0: 'batch' }, entries };
    const result = transcodeAgent('logs', encode(batch), 'source-ü', Infinity, RECEIVED);
    expect(result.accepted).toBe(entries.length);

    // The same rows written the plain way: Buffer.from, String(), bigint nanoseconds.
    const known: Record<string, [string, number]> = { info: ['info', 9], warning: ['warn', 13], err: ['error', 17] };
    const expected: Buffer[] = [];
    const text = (value: string) => {
      const bytes = Buffer.from(value);
      expected.push(Buffer.from(varint(bytes.length)), bytes);
    };
    const nanos = (value: bigint) => {
      const b = Buffer.alloc(8);
      b.writeBigInt64LE(value);
      expected.push(b);
    };
    for (const entry of entries) {
      const [level, severity] = entry.level === undefined ? ['', 0] : Object.hasOwn(known, entry.level.toLowerCase()) ? known[entry.level.toLowerCase()]! : [entry.level, 0];
      text('source-ü');
      nanos(entry.timestamp === undefined ? RECEIVED : parseTimestamp(entry.timestamp)!);
      nanos(RECEIVED);
      text(entry.host ?? batch.host);
      text(batch.service);
      text(level);
      expected.push(Buffer.from([severity]));
      text(entry.message);
      const attributes: Record<string, unknown> = { ...batch.attributes, ...entry.attributes };
      expected.push(Buffer.from(varint(Object.keys(attributes).length)));
      for (const [key, value] of Object.entries(attributes)) {
        text(key);
        text(String(value));
      }
    }
    expect(Buffer.from(result.tables[0]!.data).equals(Buffer.concat(expected))).toBe(true);
  });

  it('cuts rows into chunks for the bus', () => {
    const entries = Array.from({ length: 1000 }, (_, i) => ({ message: `line ${i} ${'x'.repeat(100)}` }));
    const result = transcodeAgent('logs', encode({ entries }), 'src', 16 * 1024, RECEIVED);
    expect(result.tables.length).toBeGreaterThan(5);
    expect(result.tables.reduce((n, t) => n + t.rows, 0)).toBe(1000);
  });

  it('refuses invalid UTF-8, malformed JSON and an empty body', () => {
    expect(refusal(() => transcodeAgent('logs', Uint8Array.from([0x7b, 0xff, 0x7d]), 's', Infinity, RECEIVED))).toBe('body is not valid UTF-8');
    expect(refusal(() => transcodeAgent('logs', new TextEncoder().encode('{"entries": ['), 's', Infinity, RECEIVED))).toMatch(/^body is not valid JSON/);
    expect(refusal(() => transcodeAgent('logs', new Uint8Array(0), 's', Infinity, RECEIVED))).toBe('body is empty: send a JSON object');
    const deep = `{"entries":[{"message":"x","attributes":{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}}]}`;
    expect(refusal(() => transcodeAgent('logs', new TextEncoder().encode(deep), 's', Infinity, RECEIVED))).toBe('body is nested deeper than 32 levels');
  });
});
