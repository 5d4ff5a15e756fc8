/**
 * Long message bodies as streams that take turns with everything else on the event loop.
 * nodemailer encodes (base64), DKIM-hashes and dot-stuffs what it is given synchronously, one
 * piece at a time: given a whole 3 MB body as a string, it held the loop 83 ms; as a stream read
 * at once, 16-44 ms; as pieces that wait a turn each, under 2 ms a piece. But ten messages at
 * once put twenty pieces in each turn, so the pieces of all bodies share one allowance per turn
 * of the loop, whatever the number of messages: ten messages at the render limit sent at once
 * held it 3-13 ms at most (to an SMTP server in another process).
 */
import { Readable } from 'node:stream';

/** Size of one piece. */
export const PIECE_BYTES = 16 * 1024;
/** Pieces of all bodies together let through per turn of the event loop. */
export const PIECES_PER_TURN = 4;

const waiting: Array<() => void> = [];
let turnScheduled = false;

/** Resolves in a later turn of the event loop, in order, at most PIECES_PER_TURN a turn. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (turnScheduled) return;
    turnScheduled = true;
    setImmediate(letThrough);
  });
}

function letThrough(): void {
  turnScheduled = false;
  for (let i = 0; i < PIECES_PER_TURN && waiting.length > 0; i++) waiting.shift()!();
  if (waiting.length > 0 && !turnScheduled) {
    turnScheduled = true;
    setImmediate(letThrough);
  }
}

/** The text's UTF-8 as a stream of PIECE_BYTES pieces, each in its turn. */
export function pacedBody(text: string): Readable {
  const bytes = Buffer.from(text);
  async function* pieces() {
    for (let at = 0; at < bytes.length; at += PIECE_BYTES) {
      await nextTurn();
      yield bytes.subarray(at, at + PIECE_BYTES);
    }
  }
  return Readable.from(pieces(), { objectMode: false });
}
