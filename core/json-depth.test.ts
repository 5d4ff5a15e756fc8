import { describe, expect, it } from 'vitest';
import { nestedDeeperThan } from './json-depth.ts';

describe('nestedDeeperThan', () => {
  it('counts objects and arrays, not brackets inside strings', () => {
    expect(nestedDeeperThan('{"a":[{"b":1}]}', 3)).toBe(false);
    expect(nestedDeeperThan('{"a":[{"b":1}]}', 2)).toBe(true);
    expect(nestedDeeperThan('{"s":"[[[[[[{{{{"}', 1)).toBe(false);
    expect(nestedDeeperThan('{"s":"quote \\" then [[[[["}', 1)).toBe(false);
    expect(nestedDeeperThan('{"s":"backslash \\\\", "t":[[[]]]}', 3)).toBe(true);
  });

  it('takes only a quote after an odd run of backslashes as escaped', () => {
    expect(nestedDeeperThan('["a\\\\"]', 1)).toBe(false); // "a\\" then ] : the string ends
    expect(nestedDeeperThan('["\\\\", [[]]]', 2)).toBe(true);
    expect(nestedDeeperThan('["\\\\\\"[[[[ "]', 1)).toBe(false); // \\\" : escaped, still inside
    expect(nestedDeeperThan('["unterminated [[[[', 1)).toBe(false);
    expect(nestedDeeperThan('"', 0)).toBe(false);
  });

  it('agrees with a character-by-character walk on random text', () => {
    const alphabet = ['"', '\\', '[', ']', '{', '}', 'a', ' ', ','];
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let n = 0; n < 5000; n++) {
      const text = Array.from({ length: 1 + Math.floor(random() * 40) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
      for (const limit of [0, 1, 2, 4]) expect(nestedDeeperThan(text, limit), `${text} ${limit}`).toBe(walkedDeeperThan(text, limit));
    }
  });

  it('scans a million levels without recursing', () => {
    expect(nestedDeeperThan('['.repeat(1_000_000) + ']'.repeat(1_000_000), 512)).toBe(true);
  });
});

/** The plain walk the scan replaced: the oracle. */
function walkedDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') {
      if (++depth > limit) return true;
    } else if (c === '}' || c === ']') depth--;
  }
  return false;
}
