/** The E.164 rule at its boundaries: the one the relay's configuration and the WhatsApp sender both use. */
import { describe, expect, it } from 'vitest';
import { isE164 } from './e164.ts';

/** The relay spec's boundaries: `+`, a digit 1-9, then 7 to 14 further digits. */
const E164_BOUNDARIES = {
  accepted: ['+12345678', '+123456789012345', '+4915112345678'],
  refused: ['+1234567', '+1234567890123456', '+01234567', '4915112345678', '+49 151 12345678', '+4915112345678\n', ''],
};

describe('isE164', () => {
  it.each(E164_BOUNDARIES.accepted)('accepts %s', (value) => {
    expect(isE164(value)).toBe(true);
  });

  it.each(E164_BOUNDARIES.refused)('refuses %j', (value) => {
    expect(isE164(value)).toBe(false);
  });
});
