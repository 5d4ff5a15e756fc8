/**
 * gzip bodies inflated into a buffer that is reused from one request to the next, by one
 * zlib stream that is reset between them.
 *
 * gunzipSync makes a zlib stream per call and its output in 16 KiB chunks, then joins them:
 * about twice the body's size in fresh buffers per request, each one new memory to fault in
 * and external memory for the garbage collector (the gateway spent a third of its CPU in GC).
 * Here the output goes straight into one buffer that grows to the working size and stays.
 *
 * The result is a view of that buffer: it is valid until the next inflate() on the same
 * inflater, so an inflater belongs to one thread that uses the body up (transcodes it into
 * rows of their own) before it takes the next request (see tasks.ts).
 *
 * Node's zlib has no public call that inflates into a given buffer; the stream's native
 * handle does (`writeSync`, the call gunzipSync itself makes, unchanged from Node 12 to 24).
 * If a Node version lacks it, inflate falls back to gunzipSync: slower, never wrong.
 */
import { constants, createGunzip, gunzipSync } from 'node:zlib';
import { badRequest } from '../core/errors.ts';

/** The part of node:zlib's native handle used here (lib/zlib.js drives it the same way). */
interface ZlibHandle {
  writeSync(flush: number, input: Uint8Array, inOffset: number, inLength: number, output: Uint8Array, outOffset: number, outLength: number): void;
  reset(): void;
  onerror: (message: string, errno: number, code: string) => void;
}

interface ZlibStreamInternals {
  _handle?: ZlibHandle;
  /** [avail_out, avail_in] after the last write. */
  _writeState?: Uint32Array;
}

/** zlib errors caused by the input (bad header, bad checksum, truncation), not by us. */
const ZLIB_DATA_ERRORS = new Set(['Z_DATA_ERROR', 'Z_BUF_ERROR', 'Z_NEED_DICT']);

const INITIAL_BYTES = 64 * 1024;
/**
 * A buffer grown past this for one large request is let go after it rather than kept:
 * requests are usually far smaller (100 spans: 75 KB; 1,000 agent log entries: 270 KB).
 */
const KEEP_BYTES = 4 * 1024 * 1024;

export class GzipInflater {
  private handle: ZlibHandle | undefined;
  private state: Uint32Array | undefined;
  /** The error the handle reported during the current write, if any. */
  private failure: { message: string; code: string } | undefined;
  private out: Buffer | undefined;

  /**
   * Inflates a whole gzip body (concatenated members too). Returns undefined once the output
   * passes maxBytes (having written at most maxBytes + 1 bytes); throws bad_request for data
   * zlib refuses. The result is valid until the next call.
   */
  inflate(body: Uint8Array, maxBytes: number): Uint8Array | undefined {
    const handle = this.openHandle();
    if (!handle) return gunzipFallback(body, maxBytes);
    // One byte past the cap tells "exactly maxBytes" from "more".
    const limit = maxBytes + 1;
    // ISIZE, the gzip trailer's last 4 bytes, is the (last member's) size mod 2^32: a hint
    // to size the buffer once, never trusted past the cap.
    const hint = body.byteLength >= 18 ? new DataView(body.buffer, body.byteOffset + body.byteLength - 4, 4).getUint32(0, true) + 1 : 0;
    let out = this.buffer(Math.min(Math.max(hint, INITIAL_BYTES), limit));
    let inOffset = 0;
    let inLength = body.byteLength;
    let produced = 0;
    try {
      for (;;) {
        handle.writeSync(constants.Z_FINISH, body, inOffset, inLength, out, produced, out.byteLength - produced);
        if (this.failure) throw dataError(this.failure);
        const outLeft = this.state![0]!;
        const inLeft = this.state![1]!;
        inOffset += inLength - inLeft;
        inLength = inLeft;
        produced = out.byteLength - outLeft;
        if (produced > maxBytes) return undefined;
        // Room left over: zlib finished (errors were reported above).
        if (outLeft > 0) return out.subarray(0, produced);
        out = this.grow(produced, limit);
      }
    } catch (err) {
      this.handle = undefined; // a zlib stream that failed is not reused
      throw err;
    } finally {
      // A buffer grown for one large request (or a bomb) is not kept.
      if (out.byteLength > KEEP_BYTES) this.out = undefined;
    }
  }

  /** The handle, reset for a new body; undefined if this Node has no usable one. */
  private openHandle(): ZlibHandle | undefined {
    this.failure = undefined;
    if (this.handle) {
      this.handle.reset();
      return this.handle;
    }
    const stream = createGunzip() as unknown as ZlibStreamInternals;
    const handle = stream._handle;
    if (typeof handle?.writeSync !== 'function' || typeof handle.reset !== 'function' || !(stream._writeState instanceof Uint32Array)) return undefined;
    // Replaces the stream's own handler, which would destroy the stream: the error is only
    // noted here, and thrown by inflate() after the write.
    handle.onerror = (message, _errno, code) => {
      this.failure = { message, code };
    };
    this.handle = handle;
    this.state = stream._writeState;
    return handle;
  }

  /** The kept buffer, or a new one of `bytes` if it is smaller. */
  private buffer(bytes: number): Buffer {
    if (!this.out || this.out.byteLength < bytes) this.out = Buffer.allocUnsafeSlow(bytes);
    return this.out;
  }

  /** A buffer twice as large (at most `limit`) holding the `produced` bytes so far. */
  private grow(produced: number, limit: number): Buffer {
    const next = Buffer.allocUnsafeSlow(Math.min(this.out!.byteLength * 2, limit));
    next.set(this.out!.subarray(0, produced));
    this.out = next;
    return next;
  }
}

/** The same contract through gunzipSync (fresh buffers), for a Node without the handle. */
function gunzipFallback(body: Uint8Array, maxBytes: number): Uint8Array | undefined {
  try {
    // zlib checks the output length after each 16 KiB chunk and throws once past the cap.
    return gunzipSync(body, { maxOutputLength: maxBytes });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ERR_BUFFER_TOO_LARGE') return undefined;
    if (typeof code === 'string' && ZLIB_DATA_ERRORS.has(code)) throw badRequest('invalid gzip data', err);
    throw err;
  }
}

/** A zlib error as bad_request when the data caused it; anything else stays internal. */
function dataError(failure: { message: string; code: string }): Error {
  const error = Object.assign(new Error(failure.message), { code: failure.code });
  return ZLIB_DATA_ERRORS.has(failure.code) ? badRequest('invalid gzip data', error) : error;
}
