/**
 * The one email address Sluice accepts anywhere (a recipient, a login, a From, a Reply-To): a
 * dot-atom local part and a dotted LDH domain, at most 254 characters. No spaces, quotes, angle
 * brackets, commas or control characters can match, so it is also safe in a mail header.
 */
const ADDR_SPEC = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
const MAX_ADDRESS_CHARS = 254;

export function isEmailAddress(value: string): boolean {
  return value.length <= MAX_ADDRESS_CHARS && ADDR_SPEC.test(value);
}
