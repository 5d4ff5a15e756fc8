import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { firstRunNotice, humanLogLine, humanLogStream, servingSummary } from './terminal.ts';

const SERVE = { role: 'serve', host: '127.0.0.1', httpPort: 4318, grpcPort: 4317, relayPort: 8080, queryPort: 0, consoleUrl: 'http://localhost:4320', dataDir: './data', cluster: false };

describe('servingSummary', () => {
  it('says which port takes which protocol, and what to do next', () => {
    const text = servingSummary(SERVE);
    expect(text).toContain('embedded: chDB and state under ./data');
    expect(text).toMatch(/OTLP\/HTTP\s+http:\/\/127\.0\.0\.1:4318\s+OTEL_EXPORTER_OTLP_ENDPOINT for http\/protobuf/);
    expect(text).toMatch(/OTLP\/gRPC\s+http:\/\/127\.0\.0\.1:4317\s+.*OTEL_EXPORTER_OTLP_PROTOCOL=grpc/);
    expect(text).toMatch(/Relay\s+http:\/\/127\.0\.0\.1:8080/);
    expect(text).toContain('npx sluice demo');
    expect(text).not.toContain('ClickHouse');
    expect(servingSummary({ ...SERVE, queryPort: 8123 })).toMatch(/ClickHouse\s+http:\/\/127\.0\.0\.1:8123\s+read-only SQL for Grafana/);
    expect(text).toMatch(/Console\s+http:\/\/localhost:4320\s+web UI/);
    expect(text).not.toContain('one-time link');
  });

  it('suggests a first source on a new data dir, and reading what is there on one with sources', () => {
    expect(servingSummary(SERVE)).toContain('npx sluice sources create --name my-app');
    const again = servingSummary({ ...SERVE, hasSources: true });
    expect(again).not.toContain('sources create');
    expect(again).not.toContain('sluice demo');
    expect(again).toContain('npx sluice sources list');
  });

  it('gives the first-run link a plain line of its own where there is no terminal', () => {
    expect(firstRunNotice('http://localhost:4320/first-run#token=frt_abc')).toMatch(/^Sign in to the console the first time[^\n]*: http:\/\/localhost:4320\/first-run#token=frt_abc\n$/);
  });

  it('says which OTLP transcoder the worker threads run, and why not WebAssembly when they do not', () => {
    expect(servingSummary({ ...SERVE, transcoder: { setting: 'auto', transcoder: 'wasm' } })).toMatch(/Transcoder\s+WebAssembly\s+SLUICE_TRANSCODER=auto\n/);
    const js = servingSummary({ ...SERVE, transcoder: { setting: 'auto', transcoder: 'js', problem: 'Node runs without --disable-wasm-trap-handler' } });
    expect(js).toMatch(/Transcoder\s+JavaScript\s+SLUICE_TRANSCODER=auto \(Node runs without --disable-wasm-trap-handler\)\n/);
    expect(servingSummary(SERVE)).not.toContain('Transcoder');
  });

  it('prints the first owner\'s one-time console link while there is none', () => {
    const text = servingSummary({ ...SERVE, firstRunLink: 'http://localhost:4320/first-run#token=frt_abc' });
    expect(text).toMatch(/one-time link[^\n]*\n {2}http:\/\/localhost:4320\/first-run#token=frt_abc\n/);
  });

  it('says loudly that the development inbox sends nothing, and where to read it', () => {
    const text = servingSummary({ ...SERVE, deliveryInbox: true });
    expect(text).toMatch(/Inbox\s+http:\/\/localhost:4320\/inbox\s+development inbox: deliveries kept, not sent/);
    expect(text).toContain('!! DEVELOPMENT INBOX ON (SLUICE_DELIVERY_INBOX=true): nothing is sent.');
    expect(text).toContain('npx sluice relay inbox list');
    expect(servingSummary({ ...SERVE, consoleUrl: '', deliveryInbox: true })).toMatch(/Inbox\s+npx sluice relay inbox list/);
    expect(servingSummary(SERVE)).not.toMatch(/inbox/i);
  });

  it('shows an address to type for a wildcard host, and no next steps for a cluster role', () => {
    const text = servingSummary({ ...SERVE, role: 'gateway', host: '0.0.0.0', relayPort: 0, cluster: true });
    expect(text).toContain('http://127.0.0.1:4318');
    expect(text).not.toContain('Relay');
    expect(text).not.toContain('npx sluice demo');
    expect(servingSummary({ ...SERVE, host: '::1' })).toContain('http://[::1]:4318');
  });
});

describe('human log lines', () => {
  it('turn a pino line into time, level, message and fields', () => {
    const time = Date.UTC(2026, 10, 24, 9, 5, 7);
    const line = humanLogLine(JSON.stringify({ level: 40, time, pid: 1, hostname: 'h', service: 'sluice', msg: 'storage is slow', table: 'otel_traces', detail: 'took 3 s', err: { message: 'timed out', stack: '…' } }));
    expect(line).toBe(`${new Date(time).toTimeString().slice(0, 8)} WARN  storage is slow table=otel_traces detail="took 3 s" err="timed out"`);
    expect(humanLogLine('not json')).toBe('not json');
  });

  it('are written one per line, whatever the chunks', () => {
    const out = new PassThrough();
    humanLogStream(out).write(`${JSON.stringify({ level: 30, time: 0, msg: 'a' })}\n${JSON.stringify({ level: 50, time: 0, msg: 'b' })}\n`);
    expect(String(out.read()).split('\n').map((l) => l.slice(9))).toEqual(['INFO  a', 'ERROR b', '']);
  });
});
