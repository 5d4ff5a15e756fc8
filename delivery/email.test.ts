/**
 * The email sender against a real SMTP server (smtp-server) on loopback: what arrives (headers,
 * bodies, envelope), what never arrives (injected headers and recipients), how each kind of
 * refusal is classified, and how transports are pooled, rate-limited, signed and closed.
 */
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../test/sluice-processes.ts';
import type { RenderedMessage } from './channel.ts';
import { EmailSender, isPlainEmailAddress, type EmailAddressing, type SmtpSettings } from './email.ts';

/** One message as the server received it. */
interface Received {
  mailFrom: string;
  rcptTo: string[];
  /** The message as sent over DATA, headers and body. */
  raw: string;
  parsed: ParsedMail;
  /** Whether the session was encrypted (STARTTLS or implicit TLS). */
  secure: boolean;
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

function newSender(options: ConstructorParameters<typeof EmailSender>[0] = {}): EmailSender {
  const sender = new EmailSender(options);
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

  it('derives the text part from the HTML when the text is empty', async () => {
    const smtp = await startSmtp();
    const outcome = await newSender().send(settingsFor(smtp.port), addressing(), message({
      html: '<h1>New submission</h1><p>Name: Ada &amp; Co</p><p>Message: hello</p>',
      text: '',
    }));
    expect(outcome.kind).toBe('delivered');
    const text = smtp.received[0]!.parsed.text ?? '';
    expect(text).toContain('NEW SUBMISSION');
    expect(text).toContain('Name: Ada & Co');
    expect(text).toContain('Message: hello');
    expect(text).not.toContain('<p>');
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
  it('a recipient refused with 550 is permanent', async () => {
    const smtp = await startSmtp({ onRcptTo: (_address, _session, callback) => callback(smtpError('5.1.1 No such user here', 550)) });
    const outcome = await newSender().send(settingsFor(smtp.port), addressing(), message());
    expect(outcome).toMatchObject({ kind: 'permanent', providerStatus: 'smtp 550' });
    expect(outcome.kind === 'permanent' && outcome.error).toContain('No such user here');
    expect(smtp.received).toEqual([]);
  });

  it('a recipient deferred with 451 is transient', async () => {
    const smtp = await startSmtp({ onRcptTo: (_address, _session, callback) => callback(smtpError('4.7.1 Greylisted, try again later', 451)) });
    const outcome = await newSender().send(settingsFor(smtp.port), addressing(), message());
    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'smtp 451' });
    expect(outcome.kind === 'transient' && outcome.error).toContain('Greylisted');
  });

  it('a message refused after DATA with 554 is permanent', async () => {
    const smtp = await startSmtp({
      onData(stream, _session, callback) {
        stream.resume();
        stream.on('end', () => callback(smtpError('5.7.1 Message rejected as spam', 554)));
      },
    });
    const outcome = await newSender().send(settingsFor(smtp.port), addressing(), message());
    expect(outcome).toMatchObject({ kind: 'permanent', providerStatus: 'smtp 554' });
    expect(outcome.kind === 'permanent' && outcome.error).toContain('rejected as spam');
  });

  it('a server that is down is transient', async () => {
    const outcome = await newSender().send(settingsFor(await freePort()), addressing(), message());
    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'smtp connection' });
  });

  it('a server that never greets is transient once the connection deadline passes', async () => {
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    cleanups.push(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    });
    const { port } = silent.address() as AddressInfo;
    const outcome = await newSender().send(settingsFor(port, { connectionTimeoutMs: 500 }), addressing(), message());
    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'smtp connection' });
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
