/**
 * BodyCollector: gathers a request body as it streams in, under a hard cap. When the length
 * is announced it allocates exactly that once; otherwise it keeps the chunks and joins them at
 * the end. Either way the result owns its ArrayBuffer (allocUnsafeSlow: never a slice of
 * Node's shared pool), so it can be transferred to a worker thread without a copy.
 */
import { SluiceError } from '../../core/errors.ts';

export function payloadTooLarge(maxBytes: number): SluiceError {
  return new SluiceError('payload_too_large', `request body exceeds ${formatBytes(maxBytes)}`);
}

export function formatBytes(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`;
}

export class BodyCollector {
  readonly done: Promise<Buffer>;
  private resolve!: (body: Buffer) => void;
  private reject!: (err: unknown) => void;
  private settled = false;
  private complete = false;
  private readonly chunks: Buffer[] = [];
  private preallocated: Buffer | undefined;
  private received = 0;

  constructor(private readonly maxBytes: number, declaredLength: number | undefined) {
    this.done = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // A rejection nobody awaited yet (the handler may still be authenticating) is not an error.
    this.done.catch(() => {});
    if (declaredLength !== undefined) {
      if (declaredLength > maxBytes) this.fail(payloadTooLarge(maxBytes));
      else this.preallocated = Buffer.allocUnsafeSlow(declaredLength);
    }
  }

  get isSettled(): boolean {
    return this.settled;
  }

  /** True once the whole body arrived (false while streaming, or after a refusal). */
  get isComplete(): boolean {
    return this.complete;
  }

  /**
   * Adds a chunk (copied: engines reuse their buffers). Returns false once the body is refused,
   * so the engine can stop reading.
   */
  push(chunk: Uint8Array, isLast: boolean): boolean {
    if (this.settled) return false;
    if (this.received + chunk.byteLength > this.maxBytes) {
      this.fail(payloadTooLarge(this.maxBytes));
      return false;
    }
    if (this.preallocated) {
      if (this.received + chunk.byteLength > this.preallocated.byteLength) {
        this.fail(new SluiceError('bad_request', 'body is longer than its Content-Length'));
        return false;
      }
      this.preallocated.set(chunk, this.received);
    } else {
      this.chunks.push(Buffer.from(chunk));
    }
    this.received += chunk.byteLength;
    if (isLast) this.finish();
    return true;
  }

  fail(err: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.chunks.length = 0;
    this.preallocated = undefined;
    this.reject(err);
  }

  private finish(): void {
    this.settled = true;
    this.complete = true;
    if (this.preallocated) {
      // A short body under a larger Content-Length: the parser would have failed the connection.
      this.resolve(this.received === this.preallocated.byteLength ? this.preallocated : this.copyOut([this.preallocated.subarray(0, this.received)]));
    } else {
      this.resolve(this.copyOut(this.chunks));
    }
    this.chunks.length = 0;
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
