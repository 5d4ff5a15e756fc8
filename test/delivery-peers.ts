/**
 * Real peers for delivery tests: an SMTP server that parses what it receives (smtp-server and
 * mailparser), webhook receivers that verify each call with the independent `standardwebhooks`
 * package and answer as the test says, and raw TCP peers that are not what the sender expects
 * (another protocol's banner, a server that stalls). Loopback only, free ports.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { Webhook } from 'standardwebhooks';

export interface ReceivedMail {
  parsed: ParsedMail;
  raw: string;
  rcptTo: string[];
}

export interface SmtpInbox {
  port: number;
  url: string;
  mails: ReceivedMail[];
  /** Answer RCPT TO for this address with `code` (e.g. 550); undefined: accept. */
  refuse: Map<string, number>;
  /** Closes the listener (clients get connection refused); start() opens it again on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startSmtpInbox(port = 0): Promise<SmtpInbox> {
  const mails: ReceivedMail[] = [];
  const refuse = new Map<string, number>();
  let server: SMTPServer | undefined;
  const inbox: SmtpInbox = {
    port,
    url: '',
    mails,
    refuse,
    async start() {
      server = new SMTPServer({
        authOptional: true,
        // A tenant's own SMTP URL carries credentials: take them over plain loopback.
        allowInsecureAuth: true,
        onAuth(auth, _session, callback) {
          callback(null, { user: auth.username });
        },
        disabledCommands: ['STARTTLS'],
        logger: false,
        // stop() means down now: pooled client connections are cut, not waited for.
        closeTimeout: 100,
        onRcptTo(address, _session, callback) {
          const code = refuse.get(address.address);
          if (code === undefined) return callback();
          const err = Object.assign(new Error(`${code} mailbox refused for the test`), { responseCode: code });
          callback(err);
        },
        onData(stream, session, callback) {
          const chunks: Buffer[] = [];
          stream.on('data', (chunk: Buffer) => chunks.push(chunk));
          stream.on('end', () => {
            const raw = Buffer.concat(chunks).toString('utf8');
            simpleParser(raw).then((parsed) => {
              mails.push({ parsed, raw, rcptTo: session.envelope.rcptTo.map((r) => r.address) });
              callback();
            }, callback);
          });
        },
      });
      await new Promise<void>((resolve, reject) => {
        server!.once('error', reject);
        server!.listen(inbox.port, '127.0.0.1', () => resolve());
      });
      inbox.port = (server.server.address() as AddressInfo).port;
      inbox.url = `smtp://127.0.0.1:${inbox.port}`;
    },
    async stop() {
      const closing = server;
      server = undefined;
      if (closing) await new Promise<void>((resolve) => closing.close(() => resolve()));
    },
  };
  await inbox.start();
  return inbox;
}

export interface WebhookCall {
  headers: IncomingHttpHeaders;
  body: string;
  /** Whether `standardwebhooks` accepted the signature with the receiver's secret. */
  verified: boolean;
  /** The status it was answered with; 'held' for a call never answered. */
  answer: number | 'held';
}

export interface WebhookReceiver {
  url: string;
  calls: WebhookCall[];
  /** The secret the receiver verifies with (set it to the one the admin returned). */
  secret: string;
  /**
   * How the next calls are answered, in order; when none is left, `then` (default 200). 'hold'
   * records the call and never answers it: the sender's attempt hangs until it gives up or dies.
   */
  answers: Array<number | 'hold'>;
  then: number;
  /** Held calls whose connection is still open (the sender is still waiting). */
  held(): number;
  close(): Promise<void>;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  let held = 0;
  const receiver: WebhookReceiver = { url: '', calls: [], secret: '', answers: [], then: 200, held: () => held, close: async () => {} };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let verified = false;
      try {
        new Webhook(receiver.secret).verify(body, request.headers as Record<string, string>);
        verified = true;
      } catch {
        verified = false;
      }
      const answer = receiver.answers.shift() ?? receiver.then;
      receiver.calls.push({ headers: request.headers, body, verified, answer: answer === 'hold' ? 'held' : answer });
      if (answer === 'hold') {
        held++;
        response.once('close', () => held--);
        return;
      }
      response.writeHead(answer, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  // No timeouts of its own: a held request stays open for as long as the sender keeps it.
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  receiver.close = () =>
    new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections(); // held requests included
    });
  return receiver;
}

/** A raw TCP peer on loopback (startRawPeer). */
export interface RawPeer {
  port: number;
  /** Connections accepted so far. */
  accepted(): number;
  /** Connections that have closed so far. */
  closed(): number;
  close(): Promise<void>;
}

/** A TCP server that greets each connection with `greeting` (none if undefined), then does what `onData` says with what it reads. */
export async function startRawPeer(greeting: string | undefined, onData: (socket: Socket, chunk: Buffer) => void = () => {}): Promise<RawPeer> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let closed = 0;
  const server = createTcpServer((socket) => {
    accepted += 1;
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      closed += 1;
    });
    socket.on('error', () => {});
    // Read, so the client's FIN is seen (a socket without a 'data' listener never closes).
    socket.on('data', (chunk: Buffer) => onData(socket, chunk));
    if (greeting !== undefined) socket.write(greeting);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    accepted: () => accepted,
    closed: () => closed,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
