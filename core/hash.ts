/** Hashes that name things: secrets stored and looked up by hash, identities derived from what they stand for. */
import { createHash } from 'node:crypto';

/** The hex SHA-256 of a string: how high-entropy secrets and unique names are stored and looked up. */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/**
 * A UUID that is a function of `parts` (RFC 9562 version 8, from their SHA-256): the same parts
 * give the same id in every process and after every restart, so whatever is derived this way
 * can be sent again under the same name and be recognised.
 */
export function derivedUuid(...parts: string[]): string {
  const hash = createHash('sha256');
  // Length-prefixed: ('ab', 'c') and ('a', 'bc') are different parts.
  for (const part of parts) hash.update(`${part.length}:${part}`);
  const bytes = hash.digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80; // version 8
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 9562 variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
