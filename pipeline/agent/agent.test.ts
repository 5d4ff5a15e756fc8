import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import { transcodeAgent } from './rows.ts';
import { MAX_BATCH_ENTRIES, validateAgentPayload } from './schemas.ts';
import { parseTimestamp } from './time.ts';

const RECEIVED = 1_795_000_000_000_000_000n;
const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

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
});

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
