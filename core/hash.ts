/** The hex SHA-256 of a string: how high-entropy secrets and unique names are stored and looked up. */
import { createHash } from 'node:crypto';

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}
