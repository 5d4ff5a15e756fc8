/**
 * The request message of a unary call, read from its stream once the call was admitted (until
 * then the stream is paused: HTTP/2 flow control holds the client to one window of 64 KiB).
 * The length in the 5-byte prefix is taken from the caller's allowance before anything of the
 * message is kept, then the message is collected into one buffer of exactly that size (its own
 * ArrayBuffer: it can be transferred to a worker). The call must end right after it.
 */
import type { Readable } from 'node:stream';
import { GrpcCode } from '../../core/errors.ts';
import { PREFIX_BYTES, type GrpcStatus } from './wire.ts';

export interface RequestMessage {
  /** Compressed with the call's grpc-encoding (the flag may be 0 on an encoded call). */
  compressed: boolean;
  body: Buffer;
}

/** A call that broke the protocol or ended before its message did: answered with this status. */
export class CallError extends Error {
  constructor(readonly status: GrpcStatus) {
    super(status.message);
    this.name = 'CallError';
  }
}

const protocolError = (message: string) => new CallError({ code: GrpcCode.INTERNAL, message });

/**
 * Resolves with the message once the client ended the call. `take(length)` throws to refuse it
 * (too large, no budget left); the read rejects with that, with a CallError, or when the stream
 * closes first.
 */
export function readMessage(stream: Readable, take: (length: number) => void): Promise<RequestMessage> {
  return new Promise((resolve, reject) => {
    const prefix = Buffer.alloc(PREFIX_BYTES);
    let prefixBytes = 0;
    let body: Buffer | undefined;
    let received = 0;

    const settle = (outcome: () => void) => {
      stream.off('data', onData).off('end', onEnd).off('close', onClose);
      stream.pause();
      outcome();
    };
    const onData = (chunk: Buffer) => {
      let offset = 0;
      if (!body) {
        offset = chunk.copy(prefix, prefixBytes, 0, PREFIX_BYTES - prefixBytes);
        prefixBytes += offset;
        if (prefixBytes < PREFIX_BYTES) return;
        if (prefix[0]! > 1) return settle(() => reject(protocolError(`invalid compressed flag ${prefix[0]}`)));
        const length = prefix.readUInt32BE(1);
        try {
          take(length);
        } catch (err) {
          return settle(() => reject(err));
        }
        body = Buffer.allocUnsafeSlow(length);
      }
      if (received + chunk.length - offset > body.length) return settle(() => reject(protocolError('a unary call carries one request message')));
      received += chunk.copy(body, received, offset);
    };
    const onEnd = () => {
      if (!body || received < body.length) return settle(() => reject(protocolError('the call ended before its request message')));
      settle(() => resolve({ compressed: prefix[0] === 1, body: body! }));
    };
    const onClose = () => settle(() => reject(new CallError({ code: GrpcCode.CANCELLED, message: 'the client cancelled the call' })));

    stream.on('data', onData).once('end', onEnd).once('close', onClose);
  });
}
