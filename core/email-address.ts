/**
 * The one email address Sluice accepts anywhere (a recipient, a login, a From, a Reply-To): a
 * dot-atom local part of at most 64 characters (RFC 5321) and a dotted LDH domain, at most 254
 * characters in all. No spaces, quotes, angle brackets, commas or control characters can match,
 * so it is also safe in a mail header.
 */
const ADDR_SPEC = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
const MAX_ADDRESS_CHARS = 254;

/** Whether `value` is exactly one plain address by the rule above. */
export function isEmailAddress(value: string): boolean {
  return value.length <= MAX_ADDRESS_CHARS && ADDR_SPEC.test(value);
}

/** The domain of an address `isEmailAddress` accepted, lower-cased. */
export function emailDomain(address: string): string {
  return address.slice(address.lastIndexOf('@') + 1).toLowerCase();
}
