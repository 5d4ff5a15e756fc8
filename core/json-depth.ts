/**
 * JSON.parse is iterative, but what walks the result afterwards (protobufjs, JSON.stringify,
 * our normalisers) recurses: a body of a million `[` would end in a stack overflow, a 500.
 * This scan of the text, before parsing, lets such a body be refused as a bad request.
 */
export function nestedDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return false;
}
