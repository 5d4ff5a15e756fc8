/**
 * PayloadPool: memory for pulled messages' payloads, handed back once their batch is stored.
 * A fresh Buffer of 100 KiB–1 MiB per message is external memory V8 must collect: at hundreds
 * of MB/s those collections were the largest part of the storage consumer's main thread. A
 * payload of minBytes to maxBytes is cut from a slab of the next power of two instead, taken
 * from that size's free list, and release() puts the slab back. The free lists hold at most
 * maxFreeBytes, so what the pool keeps after a burst stays bounded; a payload never released
 * (its batch failed, its connection broke) is collected like any other buffer.
 */
export class PayloadPool {
  /** Free slabs by size (a power of two). */
  private readonly free = new Map<number, ArrayBuffer[]>();
  private freeBytes = 0;
  /** Slabs this pool made: only those are taken back. */
  private readonly slabs = new WeakSet<ArrayBuffer>();

  constructor(
    /** Smaller payloads (acks' answers, a pull's status) get memory of their own size. */
    readonly minBytes = 64 * 1024,
    /** Larger payloads too (NATS's default max_payload is 1 MiB). */
    readonly maxBytes = 1024 * 1024,
    /** Most bytes kept in free slabs; more released than this are left to the collector. */
    readonly maxFreeBytes = 64 * 1024 * 1024,
  ) {}

  /** Memory for a payload of `size` bytes; its contents are not cleared. */
  take(size: number): Buffer {
    if (size < this.minBytes) return Buffer.allocUnsafe(size);
    if (size > this.maxBytes) return Buffer.allocUnsafeSlow(size);
    const bytes = 2 ** Math.ceil(Math.log2(size));
    let slab = this.free.get(bytes)?.pop();
    if (slab) this.freeBytes -= bytes;
    else {
      // Not from Node's shared pool (allocUnsafeSlow): the slab is this one ArrayBuffer.
      slab = Buffer.allocUnsafeSlow(bytes).buffer as ArrayBuffer;
      this.slabs.add(slab);
    }
    return Buffer.from(slab, 0, size);
  }

  /**
   * Takes back the slab under `buffer` (any view of it). The caller promises that nothing reads
   * that memory any more: the next take() may hand it out and overwrite it.
   */
  release(buffer: Uint8Array): void {
    const slab = buffer.buffer;
    if (!(slab instanceof ArrayBuffer) || !this.slabs.has(slab) || this.freeBytes + slab.byteLength > this.maxFreeBytes) return;
    let list = this.free.get(slab.byteLength);
    if (!list) this.free.set(slab.byteLength, (list = []));
    if (list.includes(slab)) throw new Error('a payload was released twice');
    list.push(slab);
    this.freeBytes += slab.byteLength;
  }

  /** Bytes waiting in free slabs (for tests and figures). */
  get freeSlabBytes(): number {
    return this.freeBytes;
  }
}
