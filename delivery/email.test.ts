/**
 * The email sender against a real SMTP server (smtp-server) on loopback: what arrives (headers,
 * bodies, envelope), what never arrives (injected headers and recipients), how each kind of
 * refusal is classified and described, how transports are pooled, rate-limited, signed and
 * closed, the deadlines of an attempt, and the egress policy on a tenant's server (a resolver
 * and a connector injected: a forbidden connection is recorded and refused in process).
 * Safety net: while this file runs, a socket may connect to loopback only.
 */
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import net, { type AddressInfo, type Socket } from 'node:net';
import tls from 'node:tls';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startRawPeer, type RawPeer } from '../test/delivery-peers.ts';
import { refusingConnector, tableResolver } from '../test/egress-doubles.ts';
import { hostileSmtpUrls } from '../test/hostile-destinations.ts';
import { allowLoopbackConnectionsOnly } from '../test/loopback-only.ts';
import { freePort } from '../test/sluice-processes.ts';
import { makeCertificate } from '../test/test-certificate.ts';
import type { RenderedMessage } from './channel.ts';
import { EgressPolicy, type ConnectOptions, type ResolvedAddress } from './egress.ts';
import { EmailSender, isPlainEmailAddress, type EmailAddressing, type EmailSenderOptions, type SmtpSettings } from './email.ts';

allowLoopbackConnectionsOnly();

/** One message as the server received it. */
interface Received {
  mailFrom: string;
  rcptTo: string[];
  /** The message as sent over DATA, headers and body. */
  raw: string;
  parsed: ParsedMail;
  /** Whether the session was encrypted (STARTTLS or implicit TLS). */
  secure: boolean;
  /** The host name the client asked for in TLS (SNI). */
  servername?: string;
}

interface TestSmtp {
  port: number;
  received: Received[];
  /** Connections the server accepted, and closed again. */
  connections: number;
  closed: number;
  /** Connections open at the same time, at most. */
  peakOpen: number;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  // Senders were pushed after their servers: close them first, in reverse.
  while (cleanups.length) await cleanups.pop()!();
});

/** A plain-text SMTP server on a random loopback port, accepting everything unless told otherwise. */
async function startSmtp(options: Partial<SMTPServerOptions> = {}): Promise<TestSmtp> {
  const state: TestSmtp = { port: 0, received: [], connections: 0, closed: 0, peakOpen: 0 };
  let open = 0;
  let queued = 0;
  const server = new SMTPServer({
    secure: false,
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    closeTimeout: 1000,
    onConnect(_session, callback) {
      state.connections += 1;
      open += 1;
      state.peakOpen = Math.max(state.peakOpen, open);
      callback();
    },
    onClose() {
      state.closed += 1;
      open -= 1;
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks);
        simpleParser(raw).then(
          (parsed) => {
            state.received.push({
              mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
              rcptTo: session.envelope.rcptTo.map((rcpt) => rcpt.address),
              raw: raw.toString('utf8'),
              parsed,
              secure: session.secure,
              ...(session.servername ? { servername: session.servername } : {}),
            });
            queued += 1;
            callback(null, `OK queued as Q${queued}`);
          },
          (err: Error) => callback(err),
        );
      });
    },
    ...options,
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.server.address() as AddressInfo).port;
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return state;
}

/** The test servers are on loopback: a policy that lets 127.0.0.1 through, unless a test gives its own. */
function newSender(options: Partial<EmailSenderOptions> = {}): EmailSender {
  const sender = new EmailSender({ egress: new EgressPolicy({ allow: ['127.0.0.1/32'] }), ...options });
  cleanups.push(() => sender.close());
  return sender;
}

function settingsFor(port: number, overrides: Partial<SmtpSettings> = {}): SmtpSettings {
  return {
    url: `smtp://127.0.0.1:${port}`,
    from: 'Sluice Relay <relay@sluice.test>',
    maxConnections: 2,
    maxMessagesPerConnection: 100,
    ratePerSecond: 0,
    // Generous: CI is a loaded 2-core machine, and a loopback server answers at once anyway.
    connectionTimeoutMs: 20_000,
    ...overrides,
  };
}

function addressing(overrides: Partial<EmailAddressing> = {}): EmailAddressing {
  const jobId = randomUUID();
  return { to: 'owner@example.test', messageId: `<${jobId}.1@sluice.invalid>`, jobId, ...overrides };
}

function message(overrides: Partial<RenderedMessage> = {}): RenderedMessage {
  return {
    subject: 'New submission: Contact',
    html: '<p>Name: Ada</p>',
    text: 'Name: Ada',
    ...overrides,
  };
}

/** Polls until fn() is truthy; the deadline is generous because nothing here is timed. */
async function waitFor(fn: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!fn()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The header block of a raw message, folded lines joined. */
function rawHeaders(raw: string): string {
  return raw.split(/\r?\n\r?\n/)[0]!.replace(/\r?\n[ \t]+/g, ' ');
}

/** Lines of the header block that start with `name:`. */
function headerLines(raw: string, name: string): string[] {
  return rawHeaders(raw)
    .split(/\r?\n/)
    .filter((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`));
}


/** Rejects with an SMTP reply code, as an smtp-server handler does. */
function smtpError(text: string, responseCode: number): Error {
  return Object.assign(new Error(text), { responseCode });
}

describe('isPlainEmailAddress', () => {
  it('accepts one bare address', () => {
    expect(isPlainEmailAddress('ada@example.test')).toBe(true);
    expect(isPlainEmailAddress("o'neil+forms@mail.example.co.uk")).toBe(true);
  });

  it('refuses display names, lists, line breaks and overlong addresses', () => {
    for (const value of [
      'Ada <ada@example.test>',
      'ada@example.test, eve@evil.test',
      'ada@example.test\r\nBcc: eve@evil.test',
      'ada@example.test\n',
      ' ada@example.test',
      'ada@localhost',
      '"ada"@example.test',
      '',
      `${'a'.repeat(65)}@example.test`,
      `ada@${Array.from({ length: 5 }, () => 'a'.repeat(60)).join('.')}.test`,
    ]) {
      expect(isPlainEmailAddress(value), JSON.stringify(value)).toBe(false);
    }
  });
});

describe('a delivered message', () => {
  it('carries the headers, the HTML as given and the text part', async () => {
    const smtp = await startSmtp();
    const sender = newSender();
    const target = addressing();
    const html = '<p>Name: &lt;script&gt;alert(1)&lt;/script&gt; &amp; Grüße ✓</p>';
    const outcome = await sender.send(settingsFor(smtp.port), target, message({
      subject: 'New submission: Grüße ✓',
      html,
      text: 'Name: <script>alert(1)</script> & Grüße ✓',
      replyTo: 'visitor@example.org',
    }));

    expect(outcome).toEqual({ kind: 'delivered', providerStatus: 'smtp 250', providerId: 'Q1' });
    expect(smtp.received).toHaveLength(1);
    const [mail] = smtp.received;
    expect(mail!.mailFrom).toBe('relay@sluice.test');
    expect(mail!.rcptTo).toEqual(['owner@example.test']);
    const parsed = mail!.parsed;
    expect(parsed.from?.value).toEqual([{ name: 'Sluice Relay', address: 'relay@sluice.test' }]);
    expect(parsed.to).toMatchObject({ value: [{ address: 'owner@example.test' }] });
    expect(parsed.subject).toBe('New submission: Grüße ✓');
    expect(parsed.messageId).toBe(target.messageId);
    expect(parsed.headers.get('x-sluice-job')).toBe(target.jobId);
    expect(parsed.replyTo?.value).toEqual([{ name: '', address: 'visitor@example.org' }]);
    // The escaped values stay escaped: the HTML part is the HTML we were given.
    expect(parsed.html).toContain(html);
    expect(parsed.html).not.toContain('<script>');
    expect(parsed.text?.trim()).toBe('Name: <script>alert(1)</script> & Grüße ✓');
  });

  it('sends the text it is given, and no text part when that is empty (the renderer makes it, not the sender)', async () => {
    const smtp = await startSmtp();
    const outcome = await newSender().send(settingsFor(smtp.port), addressing(), message({ html: '<h1>New submission</h1><p>Name: Ada &amp; Co</p>', text: '' }));
    expect(outcome.kind).toBe('delivered');
    expect(smtp.received[0]!.raw).not.toMatch(/^Content-Type: text\/plain/im);
    expect(smtp.received[0]!.parsed.html).toContain('Name: Ada &amp; Co');
  });

  it('sends a message at the render limit whole, its parts streamed', async () => {
    const smtp = await startSmtp();
    const html = `<p>${'é<&'.repeat(400_000)}</p>`;
    const text = `${'ü\n'.repeat(300_000)}end`;
    const outcome = await newSender().send(settingsFor(smtp.port), addressing(), message({ html, text }));
    expect(outcome.kind).toBe('delivered');
    const [received] = smtp.received;
    expect(received!.parsed.html).toBe(html);
    expect(received!.parsed.text).toBe(text);
  });

  it('takes a plain From address as well', async () => {
    const smtp = await startSmtp();
    const outcome = await newSender().send(settingsFor(smtp.port, { from: 'forms@sluice.test' }), addressing(), message());
    expect(outcome.kind).toBe('delivered');
    expect(smtp.received[0]!.parsed.from?.value).toEqual([{ name: '', address: 'forms@sluice.test' }]);
    expect(smtp.received[0]!.mailFrom).toBe('forms@sluice.test');
  });
});

describe('header injection', () => {
  it('leaves Reply-To out when it is not one plain address', async () => {
    const smtp = await startSmtp();
    const sender = newSender();
    const replyTos = [
      'visitor@example.org\r\nBcc: x@evil.test',
      'visitor@example.org, x@evil.test',
      'Visitor <visitor@example.org>',
      'not an address',
    ];
    for (const replyTo of replyTos) {
      expect((await sender.send(settingsFor(smtp.port), addressing(), message({ replyTo }))).kind).toBe('delivered');
    }
    expect(smtp.received).toHaveLength(replyTos.length);
    for (const mail of smtp.received) {
      expect(mail.parsed.replyTo).toBeUndefined();
      expect(headerLines(mail.raw, 'reply-to')).toEqual([]);
      expect(headerLines(mail.raw, 'bcc')).toEqual([]);
      expect(mail.raw).not.toContain('evil.test');
      expect(mail.rcptTo).toEqual(['owner@example.test']);
    }
  });

  it('keeps a subject with CRLF on one line: no extra header, no extra recipient', async () => {
    const smtp = await startSmtp();
    const outcome = await newSender().send(settingsFor(smtp.port), addressing(), message({
      subject: 'Hello\r\nBcc: x@evil.test\r\n\r\n<b>body</b>',
    }));
    expect(outcome.kind).toBe('delivered');
    const mail = smtp.received[0]!;
    expect(mail.rcptTo).toEqual(['owner@example.test']);
    expect(headerLines(mail.raw, 'bcc')).toEqual([]);
    expect(headerLines(mail.raw, 'subject')).toHaveLength(1);
    expect(mail.parsed.subject).toBe('Hello Bcc: x@evil.test <b>body</b>');
    expect(mail.parsed.bcc).toBeUndefined();
    expect(mail.parsed.html).toContain('<p>Name: Ada</p>');
  });

  it('refuses a recipient that is a list or carries CRLF, without connecting', async () => {
    const smtp = await startSmtp();
    const sender = newSender();
    for (const to of ['owner@example.test, x@evil.test', 'owner@example.test\r\nBcc: x@evil.test', 'Owner <owner@example.test>', '']) {
      const outcome = await sender.send(settingsFor(smtp.port), addressing({ to }), message());
      expect(outcome, JSON.stringify(to)).toMatchObject({ kind: 'permanent', providerStatus: 'smtp invalid address' });
    }
    expect(smtp.connections).toBe(0);
    expect(smtp.received).toEqual([]);
  });

  it('refuses a From that is not one clean address, without connecting', async () => {
    const smtp = await startSmtp();
    const sender = newSender();
    for (const from of ['relay@sluice.test\r\nBcc: x@evil.test', 'Relay\r\nBcc: x@evil.test <relay@sluice.test>', 'a@sluice.test, b@sluice.test', 'Relay <a@sluice.test> <b@sluice.test>']) {
      const outcome = await sender.send(settingsFor(smtp.port, { from }), addressing(), message());
      expect(outcome, JSON.stringify(from)).toMatchObject({ kind: 'permanent', providerStatus: 'smtp invalid address' });
    }
    expect(smtp.connections).toBe(0);
  });

  it('quotes a display name with a comma instead of reading a second address', async () => {
    const smtp = await startSmtp();
    const outcome = await newSender().send(settingsFor(smtp.port, { from: 'Acme, Inc. <relay@sluice.test>' }), addressing(), message());
    expect(outcome.kind).toBe('delivered');
    expect(smtp.received[0]!.parsed.from?.value).toEqual([{ name: 'Acme, Inc.', address: 'relay@sluice.test' }]);
  });

  it('rejects a malformed messageId or jobId as the caller bug it is', async () => {
    const sender = newSender();
    const settings = settingsFor(await freePort());
    await expect(sender.send(settings, addressing({ messageId: '<a@b>\r\nBcc: x@evil.test' }), message())).rejects.toThrow(TypeError);
    await expect(sender.send(settings, addressing({ jobId: 'job\r\nBcc: x@evil.test' }), message())).rejects.toThrow(TypeError);
  });
});

describe('classification', () => {
  it('a recipient refused with 550 is permanent, described in our words', async () => {
    const smtp = await startSmtp({ onRcptTo: (_address, _session, callback) => callback(smtpError('5.1.1 No such user here', 550)) });
    const outcome = await newSender().send(settingsFor(smtp.port), addressing(), message());
    expect(outcome).toEqual({ kind: 'permanent', providerStatus: 'smtp 550', error: 'smtp 550 5.1.1 at RCPT TO: mailbox unavailable (permanent failure, addressing status)' });
    expect(smtp.received).toEqual([]);
  });

  it('a recipient deferred with 451 is transient', async () => {
    const smtp = await startSmtp({ onRcptTo: (_address, _session, callback) => callback(smtpError('4.7.1 Greylisted, try again later', 451)) });
    const outcome = await newSender().send(settingsFor(smtp.port), addressing(), message());
    expect(outcome).toEqual({ kind: 'transient', providerStatus: 'smtp 451', error: 'smtp 451 4.7.1 at RCPT TO: local error in processing (persistent transient failure, security or policy status)' });
  });

  it('a message refused after DATA with 554 is permanent', async () => {
    const smtp = await startSmtp({
      onData(stream, _session, callback) {
        stream.resume();
        stream.on('end', () => callback(smtpError('5.7.1 Message rejected as spam', 554)));
      },
    });
    const outcome = await newSender().send(settingsFor(smtp.port), addressing(), message());
    expect(outcome).toEqual({ kind: 'permanent', providerStatus: 'smtp 554', error: 'smtp 554 5.7.1 at DATA: transaction failed (permanent failure, security or policy status)' });
  });

  it('a server that is down is transient', async () => {
    const outcome = await newSender().send(settingsFor(await freePort()), addressing(), message());
    expect(outcome).toEqual({ kind: 'transient', providerStatus: 'smtp connection', error: 'smtp connection: the connection was refused (ECONNREFUSED)' });
  });

  it('a server that never greets is transient once the connection deadline passes', async () => {
    const silent = await rawServer(undefined);
    const outcome = await newSender().send(settingsFor(silent.port, { connectionTimeoutMs: 500 }), addressing(), message());
    expect(outcome).toEqual({ kind: 'transient', providerStatus: 'smtp connection', error: 'smtp connection: no greeting in time (ETIMEDOUT)' });
  });

  it('names a server that never greets for the greeting even when its deadline ties with the inactivity one', async () => {
    // The two tie when connecting took under a millisecond; a loaded machine then sees both late.
    const silent = await rawServer(undefined);
    const frozen = vi.spyOn(Date, 'now').mockReturnValue(Date.now());
    let sending: Promise<unknown>;
    try {
      sending = newSender().send(settingsFor(silent.port, { connectionTimeoutMs: 300 }), addressing(), message());
      for (let turn = 0; turn < 1000 && silent.accepted() === 0; turn += 1) await new Promise((resolve) => setTimeout(resolve, 5));
      await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      frozen.mockRestore();
    }
    const blockedUntil = Date.now() + 1000;
    while (Date.now() < blockedUntil);
    expect(await sending).toEqual({ kind: 'transient', providerStatus: 'smtp connection', error: 'smtp connection: no greeting in time (ETIMEDOUT)' });
  });

  it('a refused login (535) is permanent, and a good one delivers', async () => {
    const smtp = await startSmtp({
      authOptional: false,
      allowInsecureAuth: true,
      onAuth(auth, _session, callback) {
        if (auth.username === 'relay' && auth.password === 'p@ss:word/1') callback(null, { user: 'relay' });
        else callback(new Error('Invalid username or password'));
      },
    });
    const sender = newSender();
    const bad = await sender.send(settingsFor(smtp.port, { url: `smtp://relay:wrong@127.0.0.1:${smtp.port}` }), addressing(), message());
    expect(bad).toMatchObject({ kind: 'permanent', providerStatus: 'smtp 535' });
    expect(bad.kind === 'permanent' && bad.error).not.toContain('wrong');

    // Credentials are %-decoded from the URL.
    const good = await sender.send(settingsFor(smtp.port, { url: `smtp://relay:${encodeURIComponent('p@ss:word/1')}@127.0.0.1:${smtp.port}` }), addressing(), message());
    expect(good.kind).toBe('delivered');
    expect(smtp.received).toHaveLength(1);
  });

  it('refuses an SMTP URL or DKIM identity it cannot use, without connecting', async () => {
    const sender = newSender();
    for (const url of ['http://127.0.0.1:25', 'not a url', 'smtp://127.0.0.1:25?tls.rejectUnauthorized=false']) {
      const outcome = await sender.send(settingsFor(25, { url }), addressing(), message());
      expect(outcome, url).toMatchObject({ kind: 'permanent', providerStatus: 'smtp invalid settings' });
    }
    const dkim = { domainName: 'sluice.test\r\nBcc: x@evil.test', keySelector: 'relay', privateKey: 'unused' };
    const outcome = await sender.send(settingsFor(25, { dkim }), addressing(), message());
    expect(outcome).toMatchObject({ kind: 'permanent', providerStatus: 'smtp invalid settings' });
  });
});

describe('TLS', () => {
  it('upgrades with STARTTLS when offered, and refuses an untrusted certificate unless tlsInsecure', async () => {
    // smtp-server's built-in self-signed certificate.
    const smtp = await startSmtp({ disabledCommands: [] });
    const sender = newSender();
    const untrusted = await sender.send(settingsFor(smtp.port), addressing(), message());
    expect(untrusted).toMatchObject({ kind: 'transient', providerStatus: 'smtp connection' });
    expect(smtp.received).toEqual([]);

    const insecure = await sender.send(settingsFor(smtp.port, { tlsInsecure: true }), addressing(), message());
    expect(insecure.kind).toBe('delivered');
    expect(smtp.received[0]!.secure).toBe(true);
  });

  it('speaks implicit TLS for smtps://', async () => {
    const smtp = await startSmtp({ secure: true, disabledCommands: [] });
    const outcome = await newSender().send(settingsFor(smtp.port, { url: `smtps://127.0.0.1:${smtp.port}`, tlsInsecure: true }), addressing(), message());
    expect(outcome.kind).toBe('delivered');
    expect(smtp.received[0]!.secure).toBe(true);
  });

  it('sends nothing in the clear when requireTls and the server offers no STARTTLS', async () => {
    const smtp = await startSmtp();
    const outcome = await newSender().send(settingsFor(smtp.port, { requireTls: true }), addressing(), message());
    expect(outcome.kind).not.toBe('delivered');
    expect(smtp.received).toEqual([]);
  });
});

describe('pooling', () => {
  it('sends 20 messages over at most maxConnections connections', async () => {
    const smtp = await startSmtp();
    const sender = newSender();
    const settings = settingsFor(smtp.port, { maxConnections: 2 });
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => sender.send(settings, addressing(), message())));
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(Array(20).fill('delivered'));
    expect(smtp.received).toHaveLength(20);
    expect(smtp.connections).toBeGreaterThanOrEqual(1);
    expect(smtp.connections).toBeLessThanOrEqual(2);
    expect(smtp.peakOpen).toBeLessThanOrEqual(2);
  });

  it('reuses one connection for sequential sends, and opens a new one after maxMessagesPerConnection', async () => {
    const smtp = await startSmtp();
    const sender = newSender();
    const settings = settingsFor(smtp.port, { maxConnections: 1, maxMessagesPerConnection: 2 });
    for (let i = 0; i < 5; i += 1) expect((await sender.send(settings, addressing(), message())).kind).toBe('delivered');
    expect(smtp.received).toHaveLength(5);
    expect(smtp.connections).toBe(3);
  });

  it('keeps to ratePerSecond', async () => {
    const smtp = await startSmtp();
    const sender = newSender();
    const settings = settingsFor(smtp.port, { maxConnections: 1, ratePerSecond: 2 });
    const started = Date.now();
    const outcomes = await Promise.all(Array.from({ length: 5 }, () => sender.send(settings, addressing(), message())));
    expect(outcomes.every((outcome) => outcome.kind === 'delivered')).toBe(true);
    // 2 per second: the 5th message cannot go before the third window opens. Only a lower bound:
    // a loaded machine can be slower, never faster.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
  });

  it('closes a transport once it has been idle, and opens a new one for the next send', async () => {
    const smtp = await startSmtp();
    const sender = newSender({ idleTransportMs: 200 });
    const settings = settingsFor(smtp.port);
    expect((await sender.send(settings, addressing(), message())).kind).toBe('delivered');
    await waitFor(() => smtp.closed === 1, 'the idle transport to close its connection');
    expect((await sender.send(settings, addressing(), message())).kind).toBe('delivered');
    expect(smtp.connections).toBe(2);
  });

  it('close() closes every transport, and later sends are not attempted', async () => {
    const first = await startSmtp();
    const second = await startSmtp();
    const sender = newSender();
    expect((await sender.send(settingsFor(first.port), addressing(), message())).kind).toBe('delivered');
    expect((await sender.send(settingsFor(second.port), addressing(), message())).kind).toBe('delivered');
    await sender.close();
    await waitFor(() => first.closed === 1 && second.closed === 1, 'both connections to close');
    const late = await sender.send(settingsFor(first.port), addressing(), message());
    expect(late).toMatchObject({ kind: 'transient', providerStatus: 'smtp not sent' });
    expect(first.connections).toBe(1);
  });
});

describe('DKIM', () => {
  it('signs with the configured domain and selector', async () => {
    const { privateKey } = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    const smtp = await startSmtp();
    const settings = settingsFor(smtp.port, { dkim: { domainName: 'sluice.test', keySelector: 'relay2026', privateKey } });
    const outcome = await newSender().send(settings, addressing(), message());
    expect(outcome.kind).toBe('delivered');
    const [signature] = headerLines(smtp.received[0]!.raw, 'dkim-signature');
    expect(signature).toBeDefined();
    const tags = Object.fromEntries(
      signature!
        .slice('dkim-signature:'.length)
        .split(';')
        .map((tag) => tag.trim().split('=').map((part) => part.trim()))
        .filter((pair) => pair.length >= 2)
        .map(([name, value]) => [name, value]),
    );
    expect(tags).toMatchObject({ a: 'rsa-sha256', d: 'sluice.test', s: 'relay2026' });
    expect(tags.h?.toLowerCase().split(':').map((name) => name.trim())).toEqual(expect.arrayContaining(['from', 'to', 'subject', 'message-id']));
    expect(tags.b?.length).toBeGreaterThan(100);
  });
});

/** A raw TCP peer (test/delivery-peers.ts), closed after the test. */
async function rawServer(greeting: string | undefined, onData?: (socket: Socket, chunk: Buffer) => void): Promise<RawPeer> {
  const peer = await startRawPeer(greeting, onData);
  cleanups.push(peer.close);
  return peer;
}

describe('a peer that is not a mail server', () => {
  it('is described by what the protocol refused, never by its banner (the operator\'s log has it, clipped)', async () => {
    const banners = [
      'SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n',
      '-NOAUTH Authentication required. redis_version:7.2.4\r\n',
      'HTTP/1.1 400 Bad Request\r\nServer: nginx/1.25.3\r\n\r\n',
      `${'x'.repeat(5000)}\r\n`,
    ];
    const logged: object[] = [];
    const sender = newSender({ log: { warn: (obj) => logged.push(obj) } });
    for (const banner of banners) {
      const peer = await rawServer(banner);
      const outcome = await sender.send(settingsFor(peer.port), addressing(), message());
      expect(outcome, banner).toEqual({ kind: 'transient', providerStatus: 'smtp protocol', error: "the server's greeting is not SMTP" });
    }
    const shown = JSON.stringify(logged);
    expect(shown).toContain('SSH-2.0-OpenSSH_9.6p1');
    expect(shown).not.toContain('x'.repeat(201));
  });

  it('names a refusing greeting by its codes only', async () => {
    const peer = await rawServer('554 5.7.1 mysql_native_password 8.0.36-0ubuntu0.22.04.1\r\n');
    const outcome = await newSender().send(settingsFor(peer.port), addressing(), message());
    expect(outcome).toEqual({ kind: 'permanent', providerStatus: 'smtp 554', error: 'smtp 554 5.7.1 at CONN: transaction failed (permanent failure, security or policy status)' });
  });
});

describe('deadlines', () => {
  it('ends an attempt whose server stalls mid-reply at timeoutMs (transient), closes that connection, and leaves another server alone', async () => {
    // Greets, then answers EHLO one continuation line at a time, forever: never idle, never done.
    const drips: NodeJS.Timeout[] = [];
    cleanups.push(async () => drips.forEach(clearInterval));
    const stalling = await rawServer('220 stall.test ESMTP\r\n', (socket) => {
      drips.push(setInterval(() => socket.writable && socket.write('250-still thinking\r\n'), 50));
    });
    const healthy = await startSmtp();
    const sender = newSender();
    const started = Date.now();
    const [stalled, delivered] = await Promise.all([
      sender.send(settingsFor(stalling.port, { timeoutMs: 800, connectionTimeoutMs: 600 }), addressing(), message()),
      sender.send(settingsFor(healthy.port), addressing(), message()),
    ]);
    expect(stalled).toEqual({ kind: 'transient', providerStatus: 'smtp timeout', error: 'smtp: no answer within 800 ms: taken back, or its connection closed (a server that had it whole may still deliver it, under the same Message-ID)' });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(delivered.kind).toBe('delivered');
    await waitFor(() => stalling.closed() === 1, 'the stalled connection to close');
  });

  it('ends an attempt whose server never greets within timeoutMs (transient)', async () => {
    const silent = await rawServer(undefined);
    const started = Date.now();
    const outcome = await newSender().send(settingsFor(silent.port, { timeoutMs: 500 }), addressing(), message());
    expect(outcome.kind).toBe('transient');
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('drops a server that goes silent after the greeting at connectionTimeoutMs, not after nodemailer\'s 10 minutes', async () => {
    const smtp = await startSmtp({ onMailFrom: () => {} });
    const started = Date.now();
    const outcome = await newSender().send(settingsFor(smtp.port, { connectionTimeoutMs: 300, timeoutMs: 60_000 }), addressing(), message());
    expect(outcome).toEqual({ kind: 'transient', providerStatus: 'smtp connection', error: 'smtp connection: the server went silent (ETIMEDOUT)' });
    expect(Date.now() - started).toBeLessThan(4000);
  });

  it('withdraws messages queued behind a stalled connection at their deadline: none goes out later', async () => {
    // The first MAIL FROM is answered after 1.5 s: the attempts have given up long before.
    let stalls = 1;
    const smtp = await startSmtp({
      onMailFrom: (_address, _session, callback) => (stalls-- > 0 ? setTimeout(() => callback(), 1500) : callback()),
    });
    const sender = newSender();
    const settings = settingsFor(smtp.port, { maxConnections: 1, timeoutMs: 400 });
    const outcomes = await Promise.all([sender.send(settings, addressing(), message()), sender.send(settings, addressing(), message())]);
    expect(outcomes.map((outcome) => outcome.providerStatus)).toEqual(['smtp timeout', 'smtp timeout']);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(smtp.received).toEqual([]);
  });
});

describe("a tenant's SMTP server and the egress policy", () => {
  /** A sender whose policy allows nothing, with a resolver answering from a table and a connector that records and refuses. */
  function guarded(answers: Record<string, string[]> = {}) {
    const { resolve, lookups } = tableResolver(answers);
    const { connect, connections } = refusingConnector();
    return { sender: newSender({ egress: new EgressPolicy({ resolve }), connect }), lookups, connections };
  }

  it('refuses every spelling of a forbidden address before connecting (permanent, saying why)', async () => {
    const smtp = await startSmtp();
    const { sender, lookups, connections } = guarded({ 'internal.example': ['10.1.2.3'] });
    const urls = [...hostileSmtpUrls(smtp.port), ['smtp://internal.example:25', 'internal.example resolves to 10.1.2.3, a private address']];
    for (const [url, reason] of urls) {
      const outcome = await sender.send(settingsFor(smtp.port, { url }), addressing(), message());
      expect(outcome, url).toEqual({ kind: 'permanent', providerStatus: 'refused', error: `refused by the egress policy: ${reason}` });
    }
    expect(lookups).toEqual(['internal.example']);
    expect(connections).toEqual([]);
    expect(smtp.connections).toBe(0);
  });

  it('does not send while the name does not resolve (transient: DNS may come back)', async () => {
    const { sender, connections } = guarded();
    const outcome = await sender.send(settingsFor(25, { url: 'smtp://mail.nowhere.example:587' }), addressing(), message());
    expect(outcome).toEqual({ kind: 'transient', providerStatus: 'unresolved', error: 'not sent: lookup of mail.nowhere.example failed: ENOTFOUND' });
    expect(connections).toEqual([]);
  });

  it('connects to the address it approved, once per connection, however the name answers later', async () => {
    const { sender, lookups, connections } = guarded({ 'mail.tenant.example': ['93.184.216.34', '2606:4700::1111'] });
    const outcome = await sender.send(settingsFor(25, { url: 'smtp://user:pw@Mail.Tenant.Example:2525' }), addressing(), message());
    expect(outcome).toEqual({ kind: 'transient', providerStatus: 'smtp connection', error: 'smtp connection: the connection was refused (ECONNREFUSED)' });
    expect(lookups).toEqual(['mail.tenant.example']);
    expect(connections).toEqual([{ host: '93.184.216.34', port: 2525, tls: false }]);
  });

  it("leaves the operator's own server to the operator: not checked", async () => {
    const smtp = await startSmtp();
    const { sender, connections } = guarded();
    const outcome = await sender.send(settingsFor(smtp.port, { operatorServer: true }), addressing(), message());
    expect(outcome.kind).toBe('delivered');
    expect(connections).toEqual([]);
  });

  it("upgrades the approved address's socket to TLS and verifies the certificate against the URL's host name", async () => {
    const { cert, key } = await makeCertificate('mail.tenant.example');
    const smtp = await startSmtp({ disabledCommands: [], key, cert });
    const seen: ConnectOptions[] = [];
    const resolve = async (): Promise<ResolvedAddress[]> => [{ address: '93.184.216.34', family: 4 }];
    // The public address stands for the test server; the certificate's CA is trusted for this test only.
    const connect = (options: ConnectOptions) => {
      seen.push(options);
      return net.connect({ host: '127.0.0.1', port: smtp.port });
    };
    const realTlsConnect = tls.connect;
    const trusting = vi.spyOn(tls, 'connect').mockImplementation(((options: tls.ConnectionOptions, listener?: () => void) => realTlsConnect({ ...options, ca: cert }, listener)) as typeof tls.connect);
    cleanups.push(async () => trusting.mockRestore());
    const sender = newSender({ egress: new EgressPolicy({ resolve }), connect });

    const outcome = await sender.send(settingsFor(smtp.port, { url: `smtp://mail.tenant.example:${smtp.port}` }), addressing(), message());
    expect(outcome.kind).toBe('delivered');
    expect(seen).toEqual([{ host: '93.184.216.34', port: smtp.port, tls: false }]);
    expect(smtp.received[0]).toMatchObject({ secure: true, servername: 'mail.tenant.example' });

    const wrongName = await sender.send(settingsFor(smtp.port, { url: `smtp://other.tenant.example:${smtp.port}` }), addressing(), message());
    expect(wrongName).toMatchObject({ kind: 'transient', providerStatus: 'smtp connection', error: expect.stringContaining('ERR_TLS_CERT_ALTNAME_INVALID') });
    expect(smtp.received).toHaveLength(1);
  });
});
