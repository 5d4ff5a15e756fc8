/**
 * The one WhatsApp address Sluice accepts anywhere (a recipient, a notification's address, a
 * send): E.164 as the relay spec has it, `+`, a digit 1-9, then 7 to 14 further digits.
 */

/** The rule as a JSON Schema pattern (the public and admin schemas use it as is). */
export const E164_PATTERN = '^\\+[1-9]\\d{7,14}$';
/** The rule in words, for refusals and schema descriptions. */
export const E164_RULE = '+ then 8 to 15 digits, the first not 0';

const E164 = new RegExp(E164_PATTERN);

/** Whether `value` is one E.164 number by the rule above. */
export function isE164(value: string): boolean {
  return E164.test(value);
}
