/**
 * When PubAcks stop coming. A nats-server that is frozen (or a peer that stopped reading) keeps
 * its TCP connection open: nats.js goes on writing, Node queues the bytes without bound, and a
 * publish that times out after 5 s leaves its bytes queued. Each timeout's request was answered
 * 503, yet its rows reach the stream once the server reads again. So, after a timeout:
 *
 * - the bus is *stalled*: publishes are refused at once (503) instead of queueing more bytes;
 *   one probe at a time (a PING, nc.flush()) waits for the server to answer;
 * - the timed-out requests' byte-budget reservations are kept until that PONG: it proves the
 *   server read everything queued before it, so the bytes have left the process;
 * - their messages are withdrawn once the server answers: publishing an empty message with the
 *   same msgID returns the original's sequence (a duplicate) or stores the empty one (the
 *   original never arrived); either is deleted. The msgID stays known to the stream after the
 *   delete (nats-server 2.9, measured), so an original arriving later still, within the
 *   duplicate window, is dropped as a duplicate. A storage consumer that takes the message
 *   first stores it (logged and counted): the withdrawal races the consumers. The empty
 *   message carries the original's columns and 0 rows, so a consumer that takes it inserts nothing.
 */
import { errors, headers, type NatsConnection } from '@nats-io/transport-node';
import { JetStreamApiError, jetstreamManager, PubHeaders, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { Reservation } from '../core/byte-budget.ts';
import { noStreamYet, streamNotFound } from '../core/jetstream-errors.ts';
import type { Logger } from '../core/log.ts';

/** A message whose publish timed out: it may still be stored. */
export interface UnsettledMessage {
  subject: string;
  msgID: string;
  columns: string;
}

interface Pending extends UnsettledMessage {
  since: number;
}

export interface StallOptions {
  /** Past it, the stream no longer knows the msgID: a late message cannot be found (JetStream duplicate window). */
  duplicateWindowMs: number;
  /** Wait before a probe is sent again after the connection dropped it, and before a withdrawal no stream took is tried again. Default 500 ms. */
  probeRetryMs?: number;
  log?: Logger;
}

/** Whether a failed publish may still be stored: it was sent, and no answer came. */
export function outcomeUnknown(err: unknown): boolean {
  return err instanceof errors.TimeoutError || (err instanceof errors.RequestError && !err.isNoResponders());
}

/**
 * Deletes message `seq` of `stream` if it is the one published with `msgID`, and says whether it
 * did; a message that is not there any more (a consumer took it) is an error, as the delete's.
 * A sequence from a PubAck is not taken on trust: the answer to a publish sent again (by nats.js
 * on a timeout, or by a withdrawal) around an election or a restart is a duplicate's, and
 * deleting by a sequence that was not this message's would remove another request's
 * acknowledged rows. Sequences are never reused, so the message read is the one deleted.
 */
export async function deleteIfOurs(jsm: JetStreamManager, stream: string, seq: number, msgID: string): Promise<boolean> {
  const stored = await jsm.streams.getMessage(stream, { seq });
  if (!stored) throw new Error(`no message ${seq} in ${stream}: a consumer took it first`);
  if (stored.header?.get(PubHeaders.MsgIdHdr) !== msgID) return false;
  await jsm.streams.deleteMessage(stream, seq, false);
  return true;
}

export class PublishStall {
  private stalledSince: number | undefined;
  private kept: Reservation[] = [];
  private probing = false;
  private withdrawing = false;
  private closed = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private withdrawTimer: NodeJS.Timeout | undefined;
  private pending: Pending[] = [];
  private readonly counts = { withdrawn: 0, notWithdrawn: 0 };

  constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly options: StallOptions,
  ) {}

  get stalled(): boolean {
    return this.stalledSince !== undefined;
  }

  /** How long the bus has been stalled, in seconds (0 when it is not). */
  get stalledSeconds(): number {
    return this.stalledSince === undefined ? 0 : Math.round((Date.now() - this.stalledSince) / 1000);
  }

  get figures(): { withdrawalsPending: number; withdrawn: number; notWithdrawn: number } {
    return { withdrawalsPending: this.pending.length, ...this.counts };
  }

  /**
   * A publish timed out: the messages that may be stored are to be withdrawn, and the bytes of
   * their requests (`kept`, split off the requests' reservations) stay reserved until the
   * server answers again.
   */
  timedOut(messages: readonly UnsettledMessage[], kept: readonly Reservation[]): void {
    this.queue(messages);
    this.kept.push(...kept);
    this.enter();
  }

  /** Messages stored that could not be withdrawn now (no stream took the delete): withdrawn as the timed-out ones are. */
  withdrawLater(messages: readonly UnsettledMessage[]): void {
    this.queue(messages);
    if (!this.stalled) void this.withdraw();
  }

  private queue(messages: readonly UnsettledMessage[]): void {
    const now = Date.now();
    for (const { subject, msgID, columns } of messages) this.pending.push({ subject, msgID, columns, since: now });
  }

  shutdown(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.withdrawTimer);
    this.releaseKept();
  }

  private enter(): void {
    if (this.stalledSince === undefined) {
      this.stalledSince = Date.now();
      this.options.log?.warn('NATS did not acknowledge a publish in time: publishes are refused with 503 until it answers again');
    }
    this.probe();
  }

  /** One PING at a time; a connection that drops it (reconnecting) gets another after a pause. */
  private probe(): void {
    if (this.probing || this.closed) return;
    this.probing = true;
    this.nc.flush().then(
      () => {
        this.probing = false;
        this.answered();
      },
      () => {
        this.probing = false;
        if (this.closed || this.nc.isClosed()) return;
        this.retryTimer = setTimeout(() => this.probe(), this.options.probeRetryMs ?? 500);
      },
    );
  }

  private answered(): void {
    if (this.stalledSince !== undefined) {
      this.options.log?.info({ seconds: this.stalledSeconds }, 'NATS answers again: publishes resume');
    }
    this.stalledSince = undefined;
    this.releaseKept();
    void this.withdraw();
  }

  private releaseKept(): void {
    for (const reservation of this.kept) reservation.release();
    this.kept = [];
  }

  /**
   * Withdraws the pending messages one by one; a timeout stalls the bus again and leaves the rest
   * for the next answer; a stream that cannot take requests yet (no leader) is asked again shortly.
   */
  private async withdraw(): Promise<void> {
    if (this.withdrawing || this.closed) return;
    this.withdrawing = true;
    try {
      const jsm = await jetstreamManager(this.nc, { checkAPI: false });
      while (this.pending.length > 0 && !this.closed && !this.stalled) {
        const message = this.pending[0]!;
        if (Date.now() - message.since > this.options.duplicateWindowMs) {
          this.notWithdrawn(message, 'the stream no longer knows its msgID (duplicate window passed)');
          continue;
        }
        try {
          const h = headers();
          h.set('Sluice-Columns', message.columns);
          h.set('Sluice-Rows', '0');
          // Same msgID: a duplicate of the original if it arrived (its sequence comes back), else itself.
          const ack = await this.js.publish(message.subject, new Uint8Array(0), { msgID: message.msgID, headers: h });
          if (!(await deleteIfOurs(jsm, ack.stream, ack.seq, message.msgID))) {
            this.notWithdrawn(message, `message ${ack.seq}, which JetStream named, is another (its msgID differs): not deleted`);
            continue;
          }
          this.pending.shift();
          this.counts.withdrawn++;
        } catch (err) {
          if (outcomeUnknown(err)) {
            this.enter();
          } else if (noStreamYet(err) || streamNotFound(err)) {
            // Nothing was done: tried again in a moment (within the duplicate window). The stream
            // took the publish moments ago: "not found" comes from a node still loading it.
            this.withdrawTimer = setTimeout(() => void this.withdraw(), this.options.probeRetryMs ?? 500);
            return;
          } else {
            // "no message found": a consumer took it first.
            this.notWithdrawn(message, err instanceof JetStreamApiError ? err.message : String(err));
          }
        }
      }
    } catch (err) {
      this.options.log?.error({ err: (err as Error).message }, 'could not withdraw timed-out publishes');
    } finally {
      this.withdrawing = false;
    }
  }

  private notWithdrawn(message: Pending, reason: string): void {
    this.pending.shift();
    this.counts.notWithdrawn++;
    this.options.log?.error({ subject: message.subject, msgID: message.msgID, reason }, 'could not withdraw a message whose publish timed out (its request got 503): its rows may be stored');
  }
}
