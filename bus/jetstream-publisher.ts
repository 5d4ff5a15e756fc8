/**
 * JetStream publishes with their PubAcks, on one reply subscription of our own. A publish is a
 * NATS request whose reply is the PubAck; nats.js's js.publish() builds, for every call, two
 * Errors with stack traces (async traces of the request and of its timer), an options copy, a
 * headers object and a race of promises. Here a publish costs a promise, a timer and a map entry,
 * and an Error is built only when one is thrown.
 *
 * Same outcomes as js.publish(), which the bus tells apart (jetstream-stall.ts#outcomeUnknown):
 * no answer in time is an errors.TimeoutError (the message may be stored); no responders (no
 * stream takes the subject) is a NoRespondersError (nothing stored); a PubAck with an error is
 * a JetStreamApiError with JetStream's code (e.g. stream full); the connection closing while a
 * PubAck is awaited is a RequestError (the message may have been sent).
 */
import { createInbox, errors, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { JetStreamApiError, type ApiError, type PubAck } from '@nats-io/jetstream';

interface Waiting {
  subject: string;
  resolve(ack: PubAck): void;
  reject(err: unknown): void;
  timer: NodeJS.Timeout;
}

export class JetStreamPublisher {
  private readonly inbox = createInbox();
  private readonly waiting = new Map<string, Waiting>();
  private subscription: Subscription | undefined;
  private next = 0;

  constructor(private readonly nc: NatsConnection, private readonly timeoutMs: number) {}

  /**
   * Publishes `data` and resolves with its PubAck. `headers` are encoded before this returns,
   * so the caller may reuse the object for its next publish.
   */
  publish(subject: string, data: Uint8Array, headers: MsgHdrs): Promise<PubAck> {
    const token = String(++this.next);
    return new Promise<PubAck>((resolve, reject) => {
      try {
        this.subscribe();
        this.nc.publish(subject, data, { reply: `${this.inbox}.${token}`, headers });
      } catch (err) {
        reject(err); // a closed connection, a payload over max_payload: nothing was sent
        return;
      }
      const timer = setTimeout(() => {
        this.waiting.delete(token);
        reject(new errors.TimeoutError());
      }, this.timeoutMs);
      this.waiting.set(token, { subject, resolve, reject, timer });
    });
  }

  /** The reply subscription, made on first use (nats.js renews it after a reconnect). */
  private subscribe(): void {
    if (this.subscription) return;
    const subscription = this.nc.subscribe(`${this.inbox}.*`, {
      callback: (err, msg) => {
        if (err === null) this.answer(msg);
      },
    });
    this.subscription = subscription;
    void subscription.closed.then(() => {
      this.subscription = undefined;
      for (const [token, waiting] of this.waiting) {
        this.waiting.delete(token);
        clearTimeout(waiting.timer);
        waiting.reject(new errors.RequestError('the NATS connection closed before the PubAck came'));
      }
    });
  }

  private answer(msg: Msg): void {
    const token = msg.subject.slice(this.inbox.length + 1);
    const waiting = this.waiting.get(token);
    if (!waiting) return; // timed out already
    this.waiting.delete(token);
    clearTimeout(waiting.timer);
    if (msg.data.length === 0 && msg.headers?.code === 503) {
      waiting.reject(new errors.NoRespondersError(waiting.subject));
      return;
    }
    try {
      const answer = msg.json<PubAck & { error?: ApiError }>();
      if (answer.error) waiting.reject(new JetStreamApiError(answer.error));
      else if (!answer.stream) waiting.reject(new Error('JetStream answered a publish without a PubAck'));
      else waiting.resolve(answer);
    } catch (err) {
      waiting.reject(err);
    }
  }
}
