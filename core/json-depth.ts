/**
 * JSON.parse is iterative, but what walks the result afterwards (protobufjs, JSON.stringify,
 * our normalisers) recurses: a body of a million `[` would end in a stack overflow, a 500.
 * This scan of the text, before parsing, lets such a body be refused as a bad request.
 *
 * Most of a JSON body is inside strings (keys, log lines), so a string is not walked
 * character by character: indexOf (a native search) jumps to its closing quote, and only a
 * quote after an odd run of backslashes is taken as escaped. The short runs between strings
 * (`":"`, `,`, numbers, brackets) are walked.
 */
export function nestedDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let end = text.indexOf('"', i + 1);
      while (end > 0 && isEscaped(text, end)) end = text.indexOf('"', end + 1);
      if (end < 0) return false; // an unterminated string: JSON.parse refuses the body
      i = end;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return false;
}

/** Whether the quote at `at` is escaped: an odd number of backslashes right before it. */
function isEscaped(text: string, at: number): boolean {
  let backslashes = 0;
  while (text.charCodeAt(at - 1 - backslashes) === 0x5c) backslashes++;
  return (backslashes & 1) === 1;
}
