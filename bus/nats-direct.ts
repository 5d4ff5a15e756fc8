/**
 * NatsDirect: a connection of Sluice's own to NATS, for the two paths that move bytes in bulk:
 * the storage consumer pulls and acknowledges messages, and the gateway publishes messages and
 * waits for their PubAcks. Everything else (streams, consumers, KV, dead-letter publishes,
 * withdrawals) stays on nats.js's connection.
 *
 * Why a connection of its own: nats.js gathers a message split across socket reads (every
 * message of ~1 MiB) in a buffer that grows by doubling, so each byte received was allocated
 * about 2.6 times and copied 1.3 times, and the garbage collector took over 40 % of the
 * consumer's main thread. Here the socket reads into one buffer reused for every read, and each
 * payload is copied once from it into memory of its announced size, lent by a pool
 * (payload-pool.ts) to which the consumer hands it back once the message's batch is stored.
 * On the way out, nats.js copies every message into a fresh buffer of its own (after the caller
 * has joined its parts into one); request() writes a message's parts to the socket as they are.
 *
 * The protocol subset: INFO, CONNECT (user:password@ or token@ from the URL), TLS for tls://
 * URLs or a server that requires it, SUB to an inbox of its own, PUB of pull requests and acks,
 * HPUB of published messages, MSG/HMSG, PING/PONG, -ERR. The connection is opened on first use
 * (or by open()); when it fails, what waits on it fails (a pull, an ack: the consumer retries,
 * JetStream redelivers what was not acked; a publish: the bus refuses its requests) and the next
 * call opens a new one, to the next server of the list.
 */
import { randomBytes } from 'node:crypto';
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { parseNatsUrl, type NatsCredentials, type NatsServer, type NatsServers } from '../core/nats-url.ts';
import { MessageHeaders, NatsProtocolParser, type NatsMessage } from './nats-protocol.ts';
import { PayloadPool } from './payload-pool.ts';

export interface NatsDirectOptions {
  /** NATS_URL: comma-separated nats:// or tls:// servers, with credentials as user:password@ or token@ (core/nats-url.ts). */
  natsUrl: string;
  /** Connection name shown by the server's monitoring. */
  name?: string;
  /** How long an ack may wait for the server's answer. Default 5000 ms (nats.js's). */
  ackTimeoutMs?: number;
  /** How long connecting (TCP, TLS, CONNECT + PING) may take. Default 5000 ms. */
  connectTimeoutMs?: number;
  /** Extra TLS options (a private CA for tls:// servers; tests). */
  tls?: ConnectionOptions;
}

/** A message pulled from a JetStream consumer. */
export interface PulledMessage {
  readonly stream: string;
  /** Its sequence in the stream. */
  readonly seq: number;
  /** 1 on first delivery. */
  readonly deliveryCount: number;
  readonly headers: MessageHeaders | undefined;
  readonly data: Buffer;
  /** Acknowledges it and waits for the server to confirm. */
  ackAck(): Promise<void>;
  /**
   * Whether the connection it was delivered on has closed since: the server may have restarted
   * meanwhile, and its sequence may now be another message's (an ack removes whichever it is).
   */
  fromClosedConnection(): boolean;
  /** Hands it back for redelivery, after `delayMs` if given. */
  nak(delayMs?: number): void;
  /**
   * Lends the payload's memory to a later message (payload-pool.ts). Only once nothing reads
   * `data`, or a view of it, any more: an insert's writes included. Calling it twice does nothing.
   */
  release(): void;
}

/** Bytes read from the socket at a time, into one buffer reused for every read. */
const READ_BUFFER_BYTES = 256 * 1024;
/** A pull the server did not end this long after its expiry means the connection is gone. */
const PULL_GRACE_MS = 5000;

/** A request written to the server whose answer will not come: it may have been acted on. */
export class UnansweredError extends Error {
  constructor(message: string, readonly timedOut: boolean, cause?: Error) {
    super(message, { cause });
  }
}

/** Settles a request (an ack, a publish): with the server's answer, or with why none will come. */
type AnswerWaiter = (answer: NatsMessage | Error) => void;

/** How often probe() tries a server again while none answers. */
const PROBE_INTERVAL_MS = 1000;

export class NatsDirect {
  private connection: Promise<Connection> | undefined;
  private serverIndex = Math.floor(Math.random() * 1e6);
  private closed = false;
  /** Since when no server could be reached (the last attempt failed), and why; undefined once one answers. */
  private unreachableSince: { at: number; reason: string } | undefined;
  private probedAt = 0;
  private readonly parsed: NatsServers;
  private readonly payloads = new PayloadPool();

  constructor(private readonly options: NatsDirectOptions) {
    this.parsed = parseNatsUrl(options.natsUrl);
  }

  /**
   * Asks the durable consumer for up to `batch` messages and resolves with those delivered
   * before it has them all or the server ends the pull (at `expiresMs`, or at once when it
   * refuses it: then this rejects with the server's reason). `signal` ends the pull early, with
   * the messages delivered so far (a stop need not wait for the expiry).
   */
  async fetch(stream: string, durable: string, batch: number, expiresMs: number, signal?: AbortSignal): Promise<PulledMessage[]> {
    const connection = await this.connect();
    return connection.pull(stream, durable, batch, expiresMs, signal);
  }

  /** Opens the connection now rather than on first use: a publisher finds out at start-up that it cannot reach NATS. */
  async open(): Promise<void> {
    await this.connect();
  }

  /**
   * Publishes a message made of `parts` (written to the socket as they are, one after the
   * other), with `headers` (a header block, `NATS/1.0\r\n...\r\n\r\n`) and a reply subject of
   * this connection's, and resolves with the answer: a JetStream publish's PubAck. Rejects with
   * UnansweredError once the message was written but no answer will come (it may have been
   * stored), or with another Error if it was not written. The caller must not change the parts
   * until this settles: they are not copied.
   */
  async request(subject: string, headers: string, parts: readonly Uint8Array[], timeoutMs: number): Promise<NatsMessage> {
    const connection = await this.connect();
    return connection.request(subject, headers, parts, timeoutMs);
  }

  /** Since when no NATS server answers this connection's attempts, and why: undefined while one does. */
  get unreachable(): { at: number; reason: string } | undefined {
    return this.unreachableSince;
  }

  /**
   * Tries to connect again while unreachable, at most once per PROBE_INTERVAL_MS whoever asks
   * (readiness checks come as often as anyone on the network sends them).
   */
  probe(): void {
    const now = Date.now();
    if (!this.unreachableSince || now - this.probedAt < PROBE_INTERVAL_MS) return;
    this.probedAt = now;
    void this.connect().catch(() => {});
  }

  async close(): Promise<void> {
    this.closed = true;
    const connection = await this.connection?.catch(() => undefined);
    connection?.close(new Error('the connection was closed'));
  }

  private connect(): Promise<Connection> {
    if (this.closed) return Promise.reject(new Error('the connection was closed'));
    const current = this.connection;
    if (current) return current;
    const index = this.serverIndex++ % this.parsed.servers.length;
    const opening = Connection.open(this.parsed.servers[index]!, this.parsed.credentials, this.options, {
      payloads: this.payloads,
      onClose: () => {
        if (this.connection === opening) this.connection = undefined;
      },
      // A message's ack goes over whichever connection is open by then: one delivered just before
      // its connection failed is still acked, not left for ack wait.
      ack: async (subject) => (await this.connect()).ackAck(subject),
      nak: (subject, delayMs) => void this.connect().then((connection) => connection.nak(subject, delayMs), () => {}),
    });
    this.connection = opening;
    opening.then(() => {
      this.unreachableSince = undefined;
    }, (err: Error) => {
      this.unreachableSince ??= { at: Date.now(), reason: err.message };
      if (this.connection === opening) this.connection = undefined;
    });
    return opening;
  }
}

interface Pull {
  batch: number;
  messages: PulledMessage[];
  resolve: (messages: PulledMessage[]) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/** What a connection needs from the NatsDirect that opened it. */
interface ConnectionOwner {
  /** Where payloads are copied to, and handed back by PulledMessage.release(). */
  payloads: PayloadPool;
  onClose(): void;
  ack(ackSubject: string): Promise<void>;
  nak(ackSubject: string, delayMs?: number): void;
}

/** One TCP (or TLS) connection and what waits on it. */
class Connection {
  private readonly inbox = `_INBOX.${randomBytes(12).toString('hex')}`;
  /** Pulls by subscription id: a pull's messages keep their stream subjects, so each pull has an inbox and sid of its own. */
  private readonly pulls = new Map<number, Pull>();
  /** Requests awaiting their answer on the inbox's `ack.<id>` subjects (subscription 1). */
  private readonly answers = new Map<string, AnswerWaiter>();
  private next = 0;
  /** Subscription ids: 1 is the answers' inbox; each pull takes the next. */
  private nextSid = 2;
  private failure: Error | undefined;
  /** What this tick has to send (send()). */
  private outgoing = '';

  private constructor(
    private readonly socket: Socket,
    private readonly options: NatsDirectOptions,
    private readonly owner: ConnectionOwner,
  ) {}

  /** Connects, sends CONNECT, and resolves once the server answered a PING (credentials accepted). */
  static open(target: NatsServer, credentials: NatsCredentials, options: NatsDirectOptions, owner: ConnectionOwner): Promise<Connection> {
    return new Promise<Connection>((resolve, reject) => {
      let connection: Connection | undefined;
      let ready = false;
      const fail = (err: Error) => {
        if (ready) return connection?.close(err);
        clearTimeout(timer);
        socket.destroy();
        reject(new Error(`cannot open a connection to NATS at ${target.shown}: ${err.message}`));
      };
      const timer = setTimeout(() => fail(new Error(`no answer within ${options.connectTimeoutMs ?? 5000} ms`)), options.connectTimeoutMs ?? 5000);
      const parser = new NatsProtocolParser({
        info: (info) => {
          if (connection) return; // a later INFO (cluster changes): nothing to do
          if (info.tls_required && !target.tls) return fail(new Error('the server requires TLS: give NATS_URL as tls://'));
          const start = (stream: Socket) => {
            connection = new Connection(stream, options, owner);
            stream.write(`CONNECT ${JSON.stringify(connectOptions(credentials, options.name))}\r\nPING\r\n`);
          };
          if (!target.tls) return start(socket);
          // NATS sends INFO in plain text, then the client starts TLS on the same socket.
          socket.removeAllListeners('data');
          const secure = tlsConnect({ socket, ...(isIP(target.host) ? {} : { servername: target.host }), ...options.tls });
          secure.on('data', (chunk: Buffer) => feed(chunk));
          secure.on('error', fail);
          secure.on('close', () => fail(new Error('connection closed')));
          secure.once('secureConnect', () => start(secure));
        },
        message: (message) => connection?.dispatch(message),
        ping: () => (connection?.socket ?? socket).write('PONG\r\n'),
        pong: () => {
          if (ready || !connection) return;
          ready = true;
          clearTimeout(timer);
          connection.subscribe();
          resolve(connection);
        },
        error: (text) => fail(new Error(`the server said: ${text}`)),
      }, (size) => owner.payloads.take(size));
      const feed = (chunk: Uint8Array) => {
        try {
          parser.push(chunk);
        } catch (err) {
          fail(err as Error);
        }
      };
      // A plain connection reads into one buffer for its whole life (onread: no buffer per
      // read), except the rest of a large payload, which it reads straight into the payload's
      // memory (the bytes are not copied again). A tls:// one reads its INFO the ordinary way,
      // then TLS takes the socket over.
      const readBuffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
      const read = (n: number, buffer: Uint8Array) => {
        try {
          if (buffer === readBuffer) parser.push(buffer.subarray(0, n));
          else parser.filledInPlace(n);
        } catch (err) {
          fail(err as Error);
        }
        return true;
      };
      const socket = target.tls
        ? netConnect({ host: target.host, port: target.port })
        : netConnect({ host: target.host, port: target.port, onread: { buffer: () => parser.payloadRest() ?? readBuffer, callback: read } });
      if (target.tls) socket.on('data', (chunk: Buffer) => feed(chunk));
      socket.setNoDelay(true);
      socket.on('error', fail);
      socket.on('close', () => fail(new Error('connection closed')));
    });
  }

  pull(stream: string, durable: string, batch: number, expiresMs: number, signal?: AbortSignal): Promise<PulledMessage[]> {
    if (this.failure) return Promise.reject(this.failure);
    if (signal?.aborted) return Promise.resolve([]);
    const sid = this.nextSid++;
    const inbox = `${this.inbox}.pull.${sid}`;
    return new Promise((resolve, reject) => {
      // The server ends the pull at its expiry (408); silence well past it means the connection is gone.
      const timer = setTimeout(() => this.close(new Error(`a pull got no answer ${expiresMs + PULL_GRACE_MS} ms after it was sent`)), expiresMs + PULL_GRACE_MS);
      // Ended early, it unsubscribes: the server delivers no more to it, and a message already on
      // its way is handed back (dispatch()).
      const stop = () => {
        const pull = this.pulls.get(sid);
        if (pull) this.endPull(sid, pull);
      };
      signal?.addEventListener('abort', stop, { once: true });
      const settled = () => signal?.removeEventListener('abort', stop);
      this.pulls.set(sid, {
        batch,
        messages: [],
        resolve: (messages) => (settled(), resolve(messages)),
        reject: (err) => (settled(), reject(err)),
        timer,
      });
      const request = JSON.stringify({ batch, expires: expiresMs * 1_000_000 });
      this.send(`SUB ${inbox} ${sid}\r\n`);
      this.publish(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${durable}`, request, inbox);
    });
  }

  /** Fails everything waiting on this connection and closes it; its NatsDirect opens another on next use. */
  close(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.owner.onClose();
    this.socket.destroy();
    for (const pull of this.pulls.values()) {
      clearTimeout(pull.timer);
      // What was delivered is ours to store (and to ack on another connection); the pull just ends.
      if (pull.messages.length > 0) pull.resolve(pull.messages);
      else pull.reject(err);
    }
    this.pulls.clear();
    for (const waiter of this.answers.values()) waiter(err);
    this.answers.clear();
  }

  subscribe(): void {
    this.send(`SUB ${this.inbox}.ack.* 1\r\n`);
  }

  dispatch(message: NatsMessage): void {
    if (message.sid === 1) {
      const id = message.subject.slice(this.inbox.length + 5);
      const waiter = this.answers.get(id);
      this.answers.delete(id);
      return waiter?.(message);
    }
    const id = message.sid;
    const pull = this.pulls.get(id);
    if (!pull) {
      // A message for a pull that ended (its timer fired first): hand it back at once rather
      // than leave it unacked until ack wait.
      if (message.reply?.startsWith('$JS.ACK.')) this.publish(message.reply, '-NAK');
      return;
    }
    const status = message.headers?.status;
    if (status !== undefined) {
      if (status === 100) return; // heartbeat
      this.endPull(id, pull, status === 404 || status === 408 ? undefined : new Error(`JetStream refused the pull: ${status} ${message.headers!.description}`));
      return;
    }
    const delivered = message.reply ? this.delivered(message) : undefined;
    if (!delivered) return this.endPull(id, pull, new Error(`a message on the pull's inbox without a JetStream ack subject`));
    pull.messages.push(delivered);
    if (pull.messages.length >= pull.batch) this.endPull(id, pull);
  }

  private endPull(sid: number, pull: Pull, err?: Error): void {
    this.pulls.delete(sid);
    clearTimeout(pull.timer);
    this.send(`UNSUB ${sid}\r\n`);
    if (err && pull.messages.length === 0) pull.reject(err);
    else pull.resolve(pull.messages);
  }

  /** Reads `$JS.ACK.<stream>.<consumer>.<delivered>.<seq>.…` (or the newer form with domain and account hash). */
  private delivered(message: NatsMessage): PulledMessage | undefined {
    const ackSubject = message.reply!;
    const tokens = ackSubject.split('.');
    if (tokens[0] !== '$JS' || tokens[1] !== 'ACK') return undefined;
    const at = tokens.length === 9 ? 2 : tokens.length >= 11 ? 4 : -1;
    if (at < 0) return undefined;
    const deliveryCount = Number(tokens[at + 2]);
    const seq = Number(tokens[at + 3]);
    if (!Number.isSafeInteger(deliveryCount) || !Number.isSafeInteger(seq)) return undefined;
    const { payloads } = this.owner;
    let released = false;
    return {
      stream: tokens[at]!,
      seq,
      deliveryCount,
      headers: message.headers,
      data: message.data,
      ackAck: () => this.owner.ack(ackSubject),
      fromClosedConnection: () => this.failure !== undefined,
      nak: (delayMs) => this.owner.nak(ackSubject, delayMs),
      release: () => {
        if (!released) payloads.release(message.data);
        released = true;
      },
    };
  }

  nak(ackSubject: string, delayMs?: number): void {
    if (!this.failure) this.publish(ackSubject, delayMs ? `-NAK ${JSON.stringify({ delay: Math.round(delayMs * 1_000_000) })}` : '-NAK');
  }

  ackAck(ackSubject: string): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const timeoutMs = this.options.ackTimeoutMs ?? 5000;
    const { replyTo, answer } = this.awaitAnswer(timeoutMs);
    this.publish(ackSubject, '+ACK', replyTo);
    return answer.then(
      (reply) => {
        if (reply.headers?.status === 503) throw new Error('no JetStream answered the ack (503)');
      },
      (err: UnansweredError) => {
        throw err.timedOut ? new Error(`the server did not confirm an ack within ${timeoutMs} ms`) : err.cause;
      },
    );
  }

  request(subject: string, headers: string, parts: readonly Uint8Array[], timeoutMs: number): Promise<NatsMessage> {
    if (this.failure) return Promise.reject(this.failure);
    const headerBytes = Buffer.byteLength(headers);
    let bytes = headerBytes;
    for (const part of parts) bytes += part.byteLength;
    const { replyTo, answer } = this.awaitAnswer(timeoutMs);
    // In order after what this tick queued, then the parts in one system call (writev).
    this.flush();
    const socket = this.socket;
    socket.cork();
    socket.write(`HPUB ${subject} ${replyTo} ${headerBytes} ${bytes}\r\n${headers}`);
    for (const part of parts) socket.write(part);
    socket.write('\r\n');
    socket.uncork();
    return answer;
  }

  /**
   * A reply subject on this connection's inbox, and the answer that comes to it: rejected with
   * UnansweredError after `timeoutMs`, or when the connection fails first (the failure as its cause).
   */
  private awaitAnswer(timeoutMs: number): { replyTo: string; answer: Promise<NatsMessage> } {
    const id = String(this.next++);
    const answer = new Promise<NatsMessage>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.answers.delete(id);
        reject(new UnansweredError(`no answer within ${timeoutMs} ms`, true));
      }, timeoutMs);
      this.answers.set(id, (reply) => {
        clearTimeout(timer);
        if (reply instanceof Error) reject(new UnansweredError(`the connection failed before the answer came: ${reply.message}`, false, reply));
        else resolve(reply);
      });
    });
    return { replyTo: `${this.inbox}.ack.${id}`, answer };
  }

  private publish(subject: string, payload: string, reply?: string): void {
    this.send(`PUB ${subject}${reply ? ` ${reply}` : ''} ${Buffer.byteLength(payload)}\r\n${payload}\r\n`);
  }

  /**
   * Writes at the end of the tick, with whatever else this tick sends: a batch's acks (up to
   * hundreds of short lines) cost one system call, not one each.
   */
  private send(text: string): void {
    if (this.outgoing === '') process.nextTick(() => this.flush());
    this.outgoing += text;
  }

  private flush(): void {
    const text = this.outgoing;
    this.outgoing = '';
    if (text !== '' && !this.failure) this.socket.write(text);
  }
}

function connectOptions(credentials: NatsCredentials, name = 'sluice'): Record<string, unknown> {
  return {
    verbose: false,
    pedantic: false,
    lang: 'sluice-direct',
    version: '1',
    protocol: 1,
    headers: true,
    no_responders: true,
    name,
    ...(credentials.user !== undefined ? { user: credentials.user, pass: credentials.pass } : {}),
    ...(credentials.token !== undefined ? { auth_token: credentials.token } : {}),
  };
}
