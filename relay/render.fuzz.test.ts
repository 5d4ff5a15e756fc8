/**
 * Fuzzing the renderer's count: for any data and any template of HTML fragments and placeholders,
 * the size render.ts counts before building a message (and refuses by) is exactly the size of
 * what it then builds. Settings and replay: test/fuzz.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FUZZ_TEST_TIMEOUT_MS, fuzzParameters } from '../test/fuzz.ts';
import { renderMessage } from './render.ts';

/** Any characters, HTML's special ones and line breaks often. */
const character = fc.oneof(fc.constantFrom('&', '<', '>', '"', "'", '\n', '\r', '😀'), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }));
const text = (maxLength: number) => fc.string({ unit: character, maxLength });
const name = fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/);
const scalar = fc.oneof(text(40), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null));
const value = fc.oneof(scalar, fc.array(scalar, { maxLength: 4 }), fc.dictionary(name, scalar, { maxKeys: 4 }));
const data = fc.dictionary(name, value, { maxKeys: 6 });
const fragment = fc.oneof(
  fc.constantFrom('<p>', '</p>', '<h1>', '</h1>', '<br>', '<table><tr><td>', '</td></tr></table>', '<a href="https://x.example/', '">link</a>', ' ', '\n', '&amp;', '\uE000', '\uE0011\uE001'),
  text(20).map((piece) => piece.replace(/[{}]/g, '')),
  fc.oneof(name, fc.tuple(name, name).map(([a, b]) => `${a}.${b}`), fc.constant('@fields')).map((path) => `{{ ${path} }}`),
);
const template = fc.array(fragment, { maxLength: 12 }).map((parts) => parts.join(''));

describe('renderMessage', () => {
  it('builds exactly as many characters as it counted', () => {
    fc.assert(
      fc.property(data, template, template, (fields, subject, html) => {
        const result = renderMessage({ template: { subject, html }, data: fields });
        expect(result.ok).toBe(true);
        if (result.ok) expect(result.message.html.length + result.message.text.length).toBe(result.chars);
      }),
      fuzzParameters(),
    );
  }, FUZZ_TEST_TIMEOUT_MS);
});
