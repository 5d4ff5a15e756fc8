/**
 * Rendering a message: what its text part reads like, that each value is worked out once per
 * message however often it is used, and that a message over the limit is refused from its
 * counted size before anything of that size is built.
 */
import { describe, expect, it } from 'vitest';
import { checkData } from './data.ts';
import { MAX_RELAY_BODY_BYTES } from './index.ts';
import { MAX_MESSAGE_CHARS, MAX_SUBJECT_CHARS, overLimit, renderMessage, type RenderRequest } from './render.ts';
import { DEFAULT_TEMPLATE, escapedLength } from './templates.ts';

/** The message of a render that must succeed. */
function rendered(request: RenderRequest) {
  const result = renderMessage(request);
  if (!result.ok) throw new Error(overLimit(result.chars));
  return result.message;
}

const lead = { name: 'Ada Lovelace', email: 'ada@example.org', message: 'Hello <there> & "all"\r\nand again', meta: { page: '/pricing', ref: 'ad' }, tags: ['a', 'b'], phone: null };

describe('the default template', () => {
  it('lists the fields as `name: value` lines in the text part, an object\'s fields and a value\'s further lines indented', () => {
    const message = rendered({ template: DEFAULT_TEMPLATE, data: lead });
    expect(message.text).toBe([
      'A new submission:',
      '',
      'name: Ada Lovelace',
      'email: ada@example.org',
      'message: Hello <there> & "all"',
      '  and again',
      'meta:',
      '  page: /pricing',
      '  ref: ad',
      'tags: a, b',
      'phone:',
    ].join('\n'));
    expect(message.subject).toBe('New submission: name, email, message, meta, tags, phone');
  });

  it('lists them as a table in the HTML, every value escaped, an object as a table of its own', () => {
    const { html } = rendered({ template: DEFAULT_TEMPLATE, data: { message: 'Hello <there> & "all"', meta: lead.meta } });
    expect(html).toBe('<p>A new submission:</p><table>'
      + '<tr><th align="left">message</th><td>Hello &lt;there&gt; &amp; &quot;all&quot;</td></tr>'
      + '<tr><th align="left">meta</th><td><table><tr><th align="left">page</th><td>/pricing</td></tr><tr><th align="left">ref</th><td>ad</td></tr></table></td></tr>'
      + '</table>');
  });

  it('takes the largest data the public endpoints accept within the size limit', () => {
    // 99 fields of 10,000 apostrophes (five characters each in HTML) and `meta` of 100 more: a 1 MiB body.
    const data: Record<string, unknown> = {};
    for (let i = 0; i < 99; i++) data[`field${i}`] = "'".repeat(10_000);
    const meta: Record<string, string> = {};
    for (let i = 0; i < 100; i++) meta[`m${i}`] = "'".repeat(400);
    data.meta = meta;
    checkData(data);
    expect(Buffer.byteLength(JSON.stringify({ siteKey: 'sk_x', formKey: 'contact', data }))).toBeLessThanOrEqual(MAX_RELAY_BODY_BYTES);
    const result = renderMessage({ template: DEFAULT_TEMPLATE, data });
    expect(result).toMatchObject({ ok: true });
    expect(result.chars).toBeGreaterThan(5_000_000);
  });
});

describe('a template of its own', () => {
  const template = {
    subject: 'Lead: {{ name }} ({{ meta }})',
    html: '<style>p { color: red }</style><h1>New lead: {{ name }}</h1><p>From <a href="https://acme.example{{ meta.page }}">our page</a></p>{{ @fields }}<p>Thanks, {{ missing }}the team</p>',
  };

  it('keeps its own text in the text part and fills it with the raw values', () => {
    const message = rendered({ template, data: { name: 'Ada & Co', meta: { page: '/pricing' } } });
    expect(message.text).toBe(['New lead: Ada & Co', '', 'From our page [https://acme.example/pricing]', '', 'name: Ada & Co', 'meta:', '  page: /pricing', '', 'Thanks, the team'].join('\n'));
    expect(message.html).toContain('<h1>New lead: Ada &amp; Co</h1>');
    expect(message.subject).toBe('Lead: Ada & Co (page: /pricing)');
  });

  it('cannot be tricked by data that looks like its placeholders or markers', () => {
    const message = rendered({ template, data: { name: '{{ meta }} \uE0000\uE001', meta: { page: '/x' } } });
    expect(message.text.split('\n')[0]).toBe('New lead: {{ meta }} \uE0000\uE001');
  });
});

describe('the cost of a message', () => {
  it('works out {{ @fields }} once per part, however often the template uses it', () => {
    let reads = 0;
    const data = Object.defineProperty({ name: 'Ada' }, 'counted', { enumerable: true, get: () => (reads++, 'value') });
    const once = { subject: 's', html: '<p>{{ @fields }}</p>' };
    rendered({ template: once, data });
    const readsForOne = reads;
    reads = 0;
    rendered({ template: { subject: 's', html: '<p>{{ @fields }}</p><p>{{ @fields }}</p>' }, data });
    expect(readsForOne).toBe(4); // HTML counted and built, text counted and built
    expect(reads).toBe(readsForOne);
  });

  it('refuses a message over the limit from its counted size, also one too large to ever build', () => {
    // 200 uses of a 5-million-character value: a billion characters, more than a string can hold.
    const meta: Record<string, string> = {};
    for (let i = 0; i < 100; i++) meta[`k${i}`] = "'".repeat(10_000);
    const inline = Object.entries(meta).map(([key, value]) => `${key}: ${value}`).join('; ');
    const result = renderMessage({ template: { subject: 's', html: '{{ meta }}'.repeat(200) }, data: { meta } });
    const expected = 200 * (escapedLength(inline) + inline.length);
    expect(expected).toBeGreaterThan(2 ** 30);
    expect(result).toEqual({ ok: false, chars: expected });
    expect(overLimit(expected)).toBe(`would be ${expected.toLocaleString('en-US')} characters (HTML and text parts), ${(expected - MAX_MESSAGE_CHARS).toLocaleString('en-US')} over the limit of 8,000,000`);
  });
});

describe('a notification', () => {
  it('sends its own subject and body, the text part converted from that body', () => {
    const message = rendered({ template: DEFAULT_TEMPLATE, data: { order: 1042 }, subject: 'Order 1042 shipped', body: '<p>It is on its way.</p><ul><li>one</li><li>two</li></ul>' });
    expect(message).toEqual({ subject: 'Order 1042 shipped', html: '<p>It is on its way.</p><ul><li>one</li><li>two</li></ul>', text: 'It is on its way.\n\n * one\n * two' });
  });

  it('fills the template where it sends no body of its own', () => {
    expect(rendered({ template: DEFAULT_TEMPLATE, data: { order: 1042 }, subject: 'Shipped' }).text).toBe('A new submission:\n\norder: 1042');
  });
});

describe('the subject', () => {
  it('is one line, cut at the limit without splitting a character', () => {
    const subject = rendered({ template: { subject: 'Hi {{ name }}', html: 'x' }, data: { name: `a\r\nBcc: x@evil.test ${'😀'.repeat(400)}` } }).subject;
    expect(subject.startsWith('Hi a Bcc: x@evil.test 😀')).toBe(true);
    expect(subject.length).toBeLessThanOrEqual(MAX_SUBJECT_CHARS);
    expect(subject.endsWith('😀…')).toBe(true);
  });
});
