/**
 * gzip and zstd bodies inflated into a buffer that is reused from one request to the next,
 * by one native zlib or zstd stream per format that is reset between them.
 *
 * gunzipSync makes a zlib stream per call and its output in 16 KiB chunks, then joins them:
 * about twice the body's size in fresh buffers per request, each one new memory to fault in
 * and external memory for the garbage collector (the gateway spent a third of its CPU in GC).
 * zstdDecompressSync (and @mongodb-js/zstd) makes a decoder per call, whose set-up cost more
 * than decoding a 75 KB request (bench/inflate.ts). Here the output goes straight into one
 * buffer that grows to the working size and stays, and the decoder stays too.
 *
 * The result is a view of that buffer: it is valid until the next inflate() on the same
 * inflater, so an inflater belongs to one thread that uses the body up (transcodes it into
 * rows of their own) before it takes the next request (see tasks.ts).
 *
 * Node's zlib has no public call that inflates into a given buffer; the stream's native
 * handle does (`writeSync`, the call gunzipSync itself makes, unchanged from Node 12 to 24;
 * zstd's handle, Node 22.15+ and 23.8+, is driven the same way). Where a Node lacks it, gzip
 * falls back to gunzipSync (slower, never wrong) and zstd is not inflated here (`native`).
 */
import * as zlib from 'node:zlib';
import { badRequest } from '../core/errors.ts';

export type InflateFormat = 'gzip' | 'zstd';

/** The part of a zlib stream's native handle used here (lib/zlib.js drives it the same way). */
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

/** What a walk of a body's headers found (zstd's frames: decompress.ts). */
export interface FrameLayout {
  /** Where each frame that holds data starts and ends; each is decoded on its own. */
  frames: { start: number; end: number }[];
  /** An upper bound of the output, summed over the frames: sizes the buffer once. */
  output: number;
  /** The most memory the decoder keeps for a frame (zstd's window). */
  window: number;
}

interface FormatDriver {
  /** A new stream of the format, or undefined where this Node has none. */
  open(): unknown;
  /** The flush that asks the decoder to finish: zlib's Z_FINISH, zstd's ZSTD_e_end. */
  finish: number;
  /** Whether an error the decoder reported was caused by the input, not by us. */
  isDataError(code: string): boolean;
  refusal: string;
}

/** zlib errors caused by the input (bad header, bad checksum, truncation), not by us. */
const ZLIB_DATA_ERRORS = new Set(['Z_DATA_ERROR', 'Z_BUF_ERROR', 'Z_NEED_DICT']);
const ZSTD_END = 2; // ZSTD_e_end, also zlib.constants.ZSTD_e_end where Node has zstd

const zstdStream = (zlib as { createZstdDecompress?: () => unknown }).createZstdDecompress;

const FORMATS: Record<InflateFormat, FormatDriver> = {
  gzip: { open: () => zlib.createGunzip(), finish: zlib.constants.Z_FINISH, isDataError: (code) => ZLIB_DATA_ERRORS.has(code), refusal: 'invalid gzip data' },
  // Everything libzstd reports but a failed allocation is about the data (corruption, size, checksum).
  zstd: { open: () => zstdStream?.(), finish: ZSTD_END, isDataError: (code) => code !== 'ZSTD_error_memory_allocation', refusal: 'invalid zstd data' },
};

const INITIAL_BYTES = 64 * 1024;
/**
 * A buffer grown past this for one large request is let go after it rather than kept:
 * requests are usually far smaller (100 spans: 75 KB; 1,000 agent log entries: 270 KB).
 */
const KEEP_BYTES = 4 * 1024 * 1024;

export class Inflater {
  private readonly driver: FormatDriver;
  private handle: ZlibHandle | undefined;
  private state: Uint32Array | undefined;
  /** The error the handle reported during the current write, if any. */
  private failure: { message: string; code: string } | undefined;
  private out: Buffer | undefined;

  constructor(readonly format: InflateFormat) {
    this.driver = FORMATS[format];
  }

  /** Whether this Node has the native handle (gzip works without it, more slowly; zstd does not). */
  get native(): boolean {
    return this.handle !== undefined || this.openHandle() !== undefined;
  }

  /**
   * Inflates a whole body: the frames of its layout one after the other, each decoded on its
   * own (zstd), or without one the whole body (gzip: zlib itself goes on through concatenated
   * members). Returns undefined once the output passes maxBytes (having written at most
   * maxBytes + 1 bytes); throws bad_request for data the decoder refuses. The result is valid
   * until the next call.
   */
  inflate(body: Uint8Array, maxBytes: number, layout?: FrameLayout): Uint8Array | undefined {
    const handle = this.openHandle();
    if (!handle) {
      if (this.format === 'gzip') return gunzipFallback(body, maxBytes);
      throw new Error('this Node has no native zstd stream: decompress zstd elsewhere (Inflater.native)');
    }
    // One byte past the cap tells "exactly maxBytes" from "more".
    const limit = maxBytes + 1;
    let out = this.buffer(Math.min(Math.max(layout?.output ?? this.hint(body), INITIAL_BYTES), limit));
    let produced = 0;
    try {
      for (const [index, frame] of (layout?.frames ?? [{ start: 0, end: body.byteLength }]).entries()) {
        if (index > 0) handle.reset();
        let inOffset = frame.start;
        let inLength = frame.end - frame.start;
        for (;;) {
          handle.writeSync(this.driver.finish, body, inOffset, inLength, out, produced, out.byteLength - produced);
          if (this.failure) throw this.refusal(this.failure);
          const outLeft = this.state![0]!;
          const inLeft = this.state![1]!;
          inOffset += inLength - inLeft;
          inLength = inLeft;
          produced = out.byteLength - outLeft;
          if (produced > maxBytes) return undefined;
          if (outLeft > 0) {
            // Room left over: the decoder finished. Where a frame's walk said where it ends, it
            // must end there; a gzip body may end in bytes zlib ignores (zeros, as gunzipSync).
            if (inLeft > 0 && layout) throw badRequest(this.driver.refusal, new Error(`${inLeft} bytes after the end of a frame`));
            break;
          }
          out = this.grow(produced, limit);
        }
      }
      return out.subarray(0, produced);
    } catch (err) {
      this.handle = undefined; // a stream that failed is not reused
      throw err;
    } finally {
      // A buffer grown for one large request (or a bomb) is not kept, nor a decoder holding a
      // large window.
      if (out.byteLength > KEEP_BYTES) this.out = undefined;
      if (layout && layout.window > KEEP_BYTES) this.handle = undefined;
    }
  }

  /** gzip's ISIZE, the trailer's last 4 bytes: the (last member's) size mod 2^32. */
  private hint(body: Uint8Array): number {
    if (this.format !== 'gzip' || body.byteLength < 18) return 0;
    return new DataView(body.buffer, body.byteOffset + body.byteLength - 4, 4).getUint32(0, true) + 1;
  }

  /** The handle, reset for a new body; undefined if this Node has no usable one. */
  private openHandle(): ZlibHandle | undefined {
    this.failure = undefined;
    if (this.handle) {
      this.handle.reset();
      return this.handle;
    }
    const stream = this.driver.open() as ZlibStreamInternals | undefined;
    const handle = stream?._handle;
    if (typeof handle?.writeSync !== 'function' || typeof handle.reset !== 'function' || !(stream?._writeState instanceof Uint32Array)) return undefined;
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

  /** A decoder's error as bad_request when the data caused it; anything else stays internal. */
  private refusal(failure: { message: string; code: string }): Error {
    const error = Object.assign(new Error(failure.message), { code: failure.code });
    return this.driver.isDataError(failure.code) ? badRequest(this.driver.refusal, error) : error;
  }
}

/** The same contract through gunzipSync (fresh buffers), for a Node without the handle. */
function gunzipFallback(body: Uint8Array, maxBytes: number): Uint8Array | undefined {
  try {
    // zlib checks the output length after each 16 KiB chunk and throws once past the cap.
    return zlib.gunzipSync(body, { maxOutputLength: maxBytes });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ERR_BUFFER_TOO_LARGE') return undefined;
    if (typeof code === 'string' && ZLIB_DATA_ERRORS.has(code)) throw badRequest('invalid gzip data', err);
    throw err;
  }
}
