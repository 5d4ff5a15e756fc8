/**
 * BodyCollector: gathers a request body as it streams in, under a hard cap and a deadline.
 * Nothing is allocated for the body until the handler takes it (after admission: rate limit,
 * key check): bytes that arrive before are kept as they come, and past a small read-ahead the
 * engine stops reading, so a request that is refused at the door costs no more than what its
 * client sent in the meantime. Once taken, the body's bytes are taken from the allowance (the
 * byte budget) as they arrive, never its announced length up front: a client that announces
 * 10 MiB and sends a trickle holds a trickle, and the deadline cuts it. What arrives is copied
 * into blocks of memory of their own (see store) and joined at the end (a body that fits one
 * block is that block), so the result owns its ArrayBuffer and can be transferred to a worker
 * thread without a copy; what is dropped (a body refused, cut or abandoned) is freed at once.
 */
import { MessageChannel } from 'node:worker_threads';
import { SluiceError } from '../../core/errors.ts';
import type { BodyAllowance, BodyDeadline } from './adapter.ts';

export function payloadTooLarge(maxBytes: number): SluiceError {
  return new SluiceError('payload_too_large', `request body exceeds ${formatBytes(maxBytes)}`);
}

/** What body() rejects with once the client closed the connection: nobody is left to answer. */
export function clientGone(): SluiceError {
  return new SluiceError('aborted', 'the client closed the connection before its answer');
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

/**
 * The largest block a body is kept in while it arrives. Large enough that glibc maps each from
 * the kernel and gives it back when freed (with MALLOC_MMAP_THRESHOLD_ set, see docs/guides/operating.md, Memory),
 * where many small copies would leave holes in its heap that it never returns.
 */
const BLOCK_BYTES = 1024 * 1024;

export class BodyCollector {
  private readonly done: Promise<Buffer>;
  private resolve!: (body: Buffer) => void;
  private reject!: (err: unknown) => void;
  private settled = false;
  private taken = false;
  /** The client sent its last chunk (possibly before the body was taken). */
  private ended = false;
  private paused = false;
  /** The body broke the framing (over the cap, longer than announced, too slow): the connection cannot be reused. */
  private malformed = false;
  /** Set by drain(): the rest of the body is read and dropped. */
  private draining: { resolve: () => void; reject: (err: unknown) => void } | undefined;
  private allowance: BodyAllowance | undefined;
  /** What arrived, copied into blocks that own their ArrayBuffers; the last one may have room left. */
  private blocks: Buffer[] = [];
  /** Bytes used in the last block. */
  private lastBlockUsed = 0;
  private received = 0;
  /** When reading for real began (take or drain): the deadline counts from there. */
  private readingSince: number | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly maxBytes: number,
    private readonly declaredLength: number | undefined,
    private readonly flow?: FlowControl,
    private readonly deadline?: BodyDeadline,
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

  /** The client announced the body's length (Content-Length): the engine knows where it ends without reading it. */
  get isAnnounced(): boolean {
    return this.declaredLength !== undefined;
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
   * Resolves once the client sent it all; rejects if it cannot be drained (see canDrain), the
   * client went away or the deadline passed.
   */
  drain(): Promise<void> {
    if (this.ended) return Promise.resolve();
    if (!this.canDrain) return Promise.reject(new Error('this body cannot be drained'));
    this.fail(new Error('answered without the body'));
    return new Promise((resolve, reject) => {
      this.draining = { resolve, reject };
      this.setPaused(false);
      this.startDeadline();
    });
  }

  /** Bytes of memory this collector holds now (its blocks). */
  get heldBytes(): number {
    return this.blocks.reduce((sum, block) => sum + block.byteLength, 0);
  }

  /**
   * The handler asks for the body: its bytes are taken from `allowance` as they arrive (those
   * read ahead at once). Rejects with the allowance's refusal (503 when the budget is used up),
   * payload_too_large past the cap, request_timeout past the deadline, or bad_request.
   */
  take(allowance?: BodyAllowance): Promise<Buffer> {
    if (this.taken || this.settled) return this.done;
    this.taken = true;
    this.allowance = allowance;
    try {
      allowance?.resize(this.received);
    } catch (err) {
      this.fail(err);
      return this.done;
    }
    this.setPaused(false);
    if (this.ended) this.finish();
    else this.startDeadline();
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
    if (this.taken && chunk.byteLength > 0) {
      try {
        this.allowance?.resize(received);
      } catch (err) {
        this.fail(err);
        return false;
      }
    }
    this.store(chunk);
    this.received = received;
    if (isLast) this.ended = true;
    // Paused past the read-ahead until taken; never once the body ended (the engine may have
    // delivered the rest before the pause took effect): the connection's next request must be read.
    this.setPaused(!this.taken && !this.ended && this.received >= READ_AHEAD_BYTES);
    if (this.taken && this.ended) this.finish();
    return true;
  }

  fail(err: unknown): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    this.draining?.reject(err);
    this.draining = undefined;
    if (this.settled) return;
    this.settled = true;
    freeNow(this.blocks);
    this.blocks = [];
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

  /**
   * From now on the body must keep arriving: `timeoutMs`, plus a second per `minBytesPerSecond`
   * received. (Not before: until the body is taken, the engine is paused by us, not the client.)
   */
  private startDeadline(): void {
    if (!this.deadline || this.deadlineTimer) return;
    this.readingSince ??= Date.now();
    this.checkDeadline();
  }

  private checkDeadline(): void {
    this.deadlineTimer = undefined;
    const reading = (this.taken && !this.settled) || this.draining !== undefined;
    if (!reading || this.ended) return;
    const { timeoutMs, minBytesPerSecond } = this.deadline!;
    const elapsed = Date.now() - this.readingSince!;
    const allowed = timeoutMs + (this.received / minBytesPerSecond) * 1000;
    if (elapsed < allowed) {
      this.deadlineTimer = setTimeout(() => this.checkDeadline(), allowed - elapsed).unref();
      return;
    }
    this.malformed = true;
    this.fail(new SluiceError('request_timeout', `the request body did not arrive in time (${this.received} bytes in ${(elapsed / 1000).toFixed(1)} s)`));
  }

  /**
   * Copies a chunk into the blocks. An announced body gets a first block like the read-ahead (or
   * its whole length when smaller: such a body is that one block, handed over as it is), then
   * blocks of BLOCK_BYTES (or what is left); a body of unknown length gets blocks as large as
   * what arrived so far (doubling) up to BLOCK_BYTES. Either way it holds at most a block more than
   * it was sent, and its bulk lives in blocks the allocator gives back to the kernel when freed.
   */
  private store(chunk: Uint8Array): void {
    for (let offset = 0; offset < chunk.byteLength; ) {
      let block = this.blocks.at(-1);
      if (!block || this.lastBlockUsed === block.byteLength) {
        const stored = this.received + offset;
        const pending = chunk.byteLength - offset;
        const left = this.declaredLength === undefined ? Infinity : this.declaredLength - stored;
        const wanted = this.declaredLength === undefined ? Math.max(pending, stored) : stored === 0 ? Math.max(pending, READ_AHEAD_BYTES) : BLOCK_BYTES;
        block = Buffer.allocUnsafeSlow(Math.min(BLOCK_BYTES, left, wanted));
        this.blocks.push(block);
        this.lastBlockUsed = 0;
      }
      const bytes = Math.min(block.byteLength - this.lastBlockUsed, chunk.byteLength - offset);
      block.set(chunk.subarray(offset, offset + bytes), this.lastBlockUsed);
      this.lastBlockUsed += bytes;
      offset += bytes;
    }
  }

  private finish(): void {
    this.settled = true;
    const blocks = this.blocks;
    this.blocks = [];
    if (blocks.length === 1 && this.lastBlockUsed === blocks[0]!.byteLength) return this.resolve(blocks[0]!);
    const body = Buffer.allocUnsafeSlow(this.received);
    let offset = 0;
    for (const block of blocks) {
      const used = block.subarray(0, Math.min(block.byteLength, this.received - offset));
      body.set(used, offset);
      offset += used.byteLength;
    }
    freeNow(blocks);
    this.resolve(body);
  }
}

/**
 * Frees the memory of buffers this collector owns, now: their ArrayBuffers are moved into a
 * message that is never delivered. Otherwise a dropped body waits for V8's next full collection,
 * which a process that goes quiet after a burst of abandoned uploads may not run for a long time.
 */
function freeNow(buffers: Buffer[]): void {
  if (buffers.length === 0) return;
  const { port1, port2 } = new MessageChannel();
  port1.postMessage(null, buffers.map((buffer) => buffer.buffer as ArrayBuffer));
  port1.close();
  port2.close();
}
