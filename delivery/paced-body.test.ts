import { describe, expect, it } from 'vitest';
import { PIECE_BYTES, PIECES_PER_TURN, pacedBody } from './paced-body.ts';

describe('pacedBody', () => {
  it('gives the text back whole, in pieces, and all bodies together at most PIECES_PER_TURN pieces a turn of the event loop', async () => {
    // More bodies than pieces a turn: paced each on its own, they would put six pieces in a turn.
    const texts = ['é'.repeat(100_000), 'a'.repeat(3 * PIECE_BYTES + 1), `${'😀'.repeat(20_000)}z`, 'b'.repeat(80_000), 'c'.repeat(80_000), 'ü'.repeat(50_000)];
    let turn = 0;
    let done = false;
    const tick = () => {
      turn++;
      if (!done) setImmediate(tick);
    };
    setImmediate(tick);
    const piecesByTurn = new Map<number, number>();
    const read = async (text: string) => {
      const pieces: Buffer[] = [];
      for await (const piece of pacedBody(text)) {
        pieces.push(piece as Buffer);
        piecesByTurn.set(turn, (piecesByTurn.get(turn) ?? 0) + 1);
      }
      return pieces;
    };
    const bodies = await Promise.all(texts.map(read));
    done = true;
    expect(bodies.map((pieces) => Buffer.concat(pieces).toString('utf8'))).toEqual(texts);
    expect(bodies.flat().every((piece) => piece.length <= PIECE_BYTES)).toBe(true);
    expect(Math.max(...piecesByTurn.values())).toBeLessThanOrEqual(PIECES_PER_TURN);
    expect(piecesByTurn.size).toBeGreaterThan(bodies.flat().length / PIECES_PER_TURN - 1);
  });
});
