/**
 * JetStream publishes with their PubAcks, on the bus's own connection (nats-direct.ts). A message's
 * parts (each request's rows) go to the socket as they are: nats.js would have them joined into
 * one buffer first and then copy that into a fresh buffer of its own, two copies of every byte
 * and a megabyte of new external memory per message for the garbage collector. nats.js's
 * js.publish() also built, per call, two Errors with stack traces, an options copy and a race of
 * promises; here a publish costs a promise, a timer and a map entry.
 *
 * Same outcomes as js.publish(), which the bus tells apart (jetstream-stall.ts#outcomeUnknown):
 * no answer in time is an errors.TimeoutError (the message may be stored); no responders (no
 * stream takes the subject) is a NoRespondersError (nothing stored); a PubAck with an error is
 * a JetStreamApiError with JetStream's code (e.g. stream full); the connection failing while a
 * PubAck is awaited is a RequestError (the message may have been sent). A message that was not
 * written (no connection could be opened) fails with the reason, and nothing was stored.
 */
import { errors } from '@nats-io/transport-node';
import { JetStreamApiError, type ApiError, type PubAck } from '@nats-io/jetstream';
import { UnansweredError, type NatsDirect } from './nats-direct.ts';

export class JetStreamPublisher {
  constructor(private readonly connection: NatsDirect, private readonly timeoutMs: number) {}

  /**
   * Publishes the concatenation of `parts` with `headers` (name, value pairs) and resolves with
   * its PubAck. The parts must not change until this settles: they are not copied.
   */
  async publish(subject: string, parts: readonly Uint8Array[], headers: ReadonlyArray<readonly [string, string]>): Promise<PubAck> {
    let answer;
    try {
      answer = await this.connection.request(subject, headerBlock(headers), parts, this.timeoutMs);
    } catch (err) {
      if (err instanceof UnansweredError) throw err.timedOut ? new errors.TimeoutError() : new errors.RequestError(err.message);
      throw err;
    }
    if (answer.data.length === 0 && answer.headers?.status === 503) throw new errors.NoRespondersError(subject);
    const ack = JSON.parse(answer.data.toString()) as PubAck & { error?: ApiError };
    if (ack.error) throw new JetStreamApiError(ack.error);
    if (!ack.stream) throw new Error('JetStream answered a publish without a PubAck');
    return ack;
  }
}

/** NATS's header block: `NATS/1.0`, a `Name: value` line each, an empty line. Values are Sluice's own (no CR or LF). */
function headerBlock(headers: ReadonlyArray<readonly [string, string]>): string {
  let block = 'NATS/1.0\r\n';
  for (const [name, value] of headers) block += `${name}: ${value}\r\n`;
  return `${block}\r\n`;
}
