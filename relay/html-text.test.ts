/**
 * The text of HTML for a message's text part, also where html-to-text gives up: HTML nested
 * deeper than its recursion goes still has a text part, in one linear pass.
 */
import { describe, expect, it } from 'vitest';
import { htmlText, textWithoutTags } from './html-text.ts';

describe('htmlText', () => {
  it('reads as the HTML shows, headings in the case they were written', () => {
    expect(htmlText('<h1>Order shipped</h1><p>It is on its way &amp; <a href="https://acme.example/t/1">tracked</a>.</p>')).toBe(
      'Order shipped\n\nIt is on its way & tracked [https://acme.example/t/1].',
    );
  });

  it('has a text part for HTML nested deeper than html-to-text goes', () => {
    expect(htmlText(`${'<b>'.repeat(50_000)}Ada &amp; Co${'</b>'.repeat(50_000)}`)).toBe('Ada & Co');
  });
});

describe('textWithoutTags', () => {
  it('keeps the text, a line break per block, and drops scripts and styles whole', () => {
    expect(textWithoutTags('<style>p { x: "<b>" }</style><p>One &lt;two&gt;</p><div>Three<br>four</div><SCRIPT>alert(1)</script  >five')).toBe('One <two>\n\nThree\nfour\nfive');
  });

  it('stops at a tag or a style that never ends', () => {
    expect(textWithoutTags('one <style>never closed')).toBe('one');
    expect(textWithoutTags('one <b unclosed')).toBe('one');
  });
});
