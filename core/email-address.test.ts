/** The email address rule: RFC 5321's 64-character local part and the 254-character whole. */
import { describe, expect, it } from 'vitest';
import { emailDomain, isEmailAddress } from './email-address.ts';

describe('isEmailAddress', () => {
  it('takes a local part of 64 characters and refuses one of 65', () => {
    expect(isEmailAddress(`${'a'.repeat(64)}@example.test`)).toBe(true);
    expect(isEmailAddress(`${'a'.repeat(65)}@example.test`)).toBe(false);
    expect(isEmailAddress(`${'a'.repeat(70)}@example.test`)).toBe(false);
  });

  it('takes 254 characters in all and refuses 255', () => {
    // Two labels of 63 and their dots, then the rest: a domain of `length` characters.
    const domain = (length: number) => `${'d'.repeat(63)}.${'d'.repeat(63)}.${'d'.repeat(length - 128)}`;
    expect(isEmailAddress(`${'a'.repeat(64)}@${domain(189)}`)).toBe(true);
    expect(isEmailAddress(`${'a'.repeat(64)}@${domain(190)}`)).toBe(false);
  });

  it('refuses lists, names, quotes and line breaks', () => {
    for (const value of ['a@b.test, c@d.test', 'A <a@b.test>', '"a"@b.test', 'a@b.test\r\nBcc: c@d.test', 'a@b.test\n', 'a@localhost', '@b.test', '']) {
      expect(isEmailAddress(value), JSON.stringify(value)).toBe(false);
    }
  });
});

describe('emailDomain', () => {
  it('is the part after the @, lower-cased', () => {
    expect(emailDomain('Relay@Mail.Example.TEST')).toBe('mail.example.test');
  });
});
