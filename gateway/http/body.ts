/**
 * BodyCollector: gathers a request body as it streams in, under a hard cap. Nothing is
 * allocated for the body until the handler takes it (after admission: rate limit, key check,
 * a byte-budget reservation): bytes that arrive before are kept as they come, and past a small
 * read-ahead the engine stops reading, so a request that is refused at the door costs no more
 * than what its client sent in the meantime. When the length is announced, take() allocates
 * exactly that once; otherwise the chunks are kept (the reservation growing with them) and
 * joined at the end. Either way the result owns its ArrayBuffer (allocUnsafeSlow: never a
 * slice of Node's shared pool), so it can be transferred to a worker thread without a copy.
 */
import { SluiceError } from '../../core/errors.ts';
import type { BodyAllowance } from './adapter.ts';

export function payloadTooLarge(maxBytes: number): SluiceError {
  return new SluiceError('payload_too_large', `request body exceeds ${formatBytes(maxBytes)}`);
}

export function formatBytes(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`;
}

/** The engine's brake: stop and restart reading the request body from the socket. */
export interface FlowControl {
  pause(): void;
  resume(): void;
}

/** Bytes read before the handler takes the body; past it the engine pauses the socket. */
export const READ_AHEAD_BYTES = 64 * 1024;

export class BodyCollector {
  private readonly done: Promise<Buffer>;
  private resolve!: (body: Buffer) => void;
  private reject!: (err: unknown) => void;
  private settled = false;
  private taken = false;
  /** The client sent its last chunk (possibly before the body was taken). */
  private ended = false;
  private paused = false;
  /** The body broke the framing (over the cap, or longer than announced): the connection cannot be reused. */
  private malformed = false;
  /** Set by drain(): the rest of the body is read and dropped. */
  private draining: { resolve: () => void; reject: (err: unknown) => void } | undefined;
  private allowance: BodyAllowance | undefined;
  private chunks: Buffer[] = [];
  private preallocated: Buffer | undefined;
  private received = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly declaredLength: number | undefined,
    private readonly flow?: FlowControl,
  ) {
    this.done = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // A rejection nobody awaited yet (the handler may still be authenticating) is not an error.
    this.done.catch(() => {});
    if (declaredLength !== undefined && declaredLength > maxBytes) this.refuse(payloadTooLarge(maxBytes));
  }

  get isSettled(): boolean {
    return this.settled;
  }

  /**
   * True once the client sent the whole body, taken or not (false while streaming, or when
   * it was refused mid-stream): the engine may keep the connection for the next request.
   */
  get isComplete(): boolean {
    return this.ended;
  }

  /**
   * After an answer decided without the whole body (a refusal at the door): the rest can be
   * read and dropped — so the client can finish sending and read its answer, and send its next
   * request on the same connection — when its length is announced and within the cap.
   * Otherwise the engine closes the connection.
   */
  get canDrain(): boolean {
    return this.declaredLength !== undefined && !this.malformed;
  }

  /**
   * Reads the rest of the body and drops it (nothing is kept); a body not taken yet is refused.
   * Resolves once the client sent it all; rejects if it cannot be drained (see canDrain) or the
   * client went away.
   */
  drain(): Promise<void> {
    if (this.ended) return Promise.resolve();
    if (!this.canDrain) return Promise.reject(new Error('this body cannot be drained'));
    this.fail(new Error('answered without the body'));
    return new Promise((resolve, reject) => {
      this.draining = { resolve, reject };
      this.setPaused(false);
    });
  }

  /** Bytes of body this collector holds now (chunks kept, or the allocation). */
  get heldBytes(): number {
    return this.preallocated ? this.preallocated.byteLength : this.chunks.reduce((sum, chunk) => sum + chunk.byteLength, 0);
  }

  /**
   * The handler asks for the body: its bytes are taken from `allowance` (the Content-Length,
   * or as they arrive), then allocated. Rejects with the allowance's refusal (503 when the
   * budget is used up), payload_too_large past the cap, or bad_request.
   */
  take(allowance?: BodyAllowance): Promise<Buffer> {
    if (this.taken || this.settled) return this.done;
    this.taken = true;
    this.allowance = allowance;
    try {
      allowance?.resize(this.declaredLength ?? this.received);
    } catch (err) {
      this.fail(err);
      return this.done;
    }
    if (this.declaredLength !== undefined) {
      this.preallocated = Buffer.allocUnsafeSlow(this.declaredLength);
      let offset = 0;
      for (const chunk of this.chunks) {
        this.preallocated.set(chunk, offset);
        offset += chunk.byteLength;
      }
      this.chunks = [];
    }
    this.setPaused(false);
    if (this.ended) this.finish();
    return this.done;
  }

  /**
   * Adds a chunk (copied: engines reuse their buffers). Returns false once the body is refused,
   * so the engine can stop reading.
   */
  push(chunk: Uint8Array, isLast: boolean): boolean {
    if (this.draining) return this.drop(chunk, isLast);
    if (this.settled) return false;
    const received = this.received + chunk.byteLength;
    if (received > this.maxBytes) {
      this.refuse(payloadTooLarge(this.maxBytes));
      return false;
    }
    if (this.declaredLength !== undefined && received > this.declaredLength) {
      this.refuse(new SluiceError('bad_request', 'body is longer than its Content-Length'));
      return false;
    }
    if (this.preallocated) {
      this.preallocated.set(chunk, this.received);
    } else {
      if (this.taken && chunk.byteLength > 0) {
        try {
          this.allowance?.resize(received);
        } catch (err) {
          this.fail(err);
          return false;
        }
      }
      if (chunk.byteLength > 0) this.chunks.push(Buffer.from(chunk));
    }
    this.received = received;
    if (isLast) this.ended = true;
    // Paused past the read-ahead until taken; never once the body ended (the engine may have
    // delivered the rest before the pause took effect): the connection's next request must be read.
    this.setPaused(!this.taken && !this.ended && this.received >= READ_AHEAD_BYTES);
    if (this.taken && this.ended) this.finish();
    return true;
  }

  fail(err: unknown): void {
    this.draining?.reject(err);
    this.draining = undefined;
    if (this.settled) return;
    this.settled = true;
    this.chunks = [];
    this.preallocated = undefined;
    this.reject(err);
    // Whatever comes next (an answer, a drain, a close) needs the socket read again.
    this.setPaused(false);
  }

  private drop(chunk: Uint8Array, isLast: boolean): boolean {
    this.received += chunk.byteLength;
    if (this.received > this.declaredLength!) {
      this.malformed = true;
      this.fail(new SluiceError('bad_request', 'body is longer than its Content-Length'));
      return false;
    }
    if (isLast) {
      this.ended = true;
      this.draining!.resolve();
      this.draining = undefined;
    }
    return true;
  }

  private refuse(err: SluiceError): void {
    this.malformed = true;
    this.fail(err);
  }

  private setPaused(paused: boolean): void {
    if (paused === this.paused || !this.flow) return;
    this.paused = paused;
    if (paused) this.flow.pause();
    else this.flow.resume();
  }

  private finish(): void {
    this.settled = true;
    if (this.preallocated) {
      // A short body under a larger Content-Length: the parser would have failed the connection.
      this.resolve(this.received === this.preallocated.byteLength ? this.preallocated : this.copyOut([this.preallocated.subarray(0, this.received)]));
    } else {
      this.resolve(this.copyOut(this.chunks));
    }
    this.chunks = [];
    this.preallocated = undefined;
  }

  private copyOut(parts: Buffer[]): Buffer {
    const out = Buffer.allocUnsafeSlow(this.received);
    let offset = 0;
    for (const part of parts) {
      out.set(part, offset);
      offset += part.byteLength;
    }
    return out;
  }
}
