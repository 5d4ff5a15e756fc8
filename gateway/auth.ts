/**
 * API key extraction, shared by HTTP headers and gRPC metadata:
 * `X-API-Key: <key>` or `Authorization: Bearer <key>`.
 */
import { SluiceError } from '../core/errors.ts';

export interface KeyAuthenticator {
  /** The source a key belongs to, or undefined if unknown or revoked. */
  authenticate(apiKey: string): string | undefined;
}

export function presentedApiKey(xApiKey: string | undefined, authorization: string | undefined): string | undefined {
  if (xApiKey) return xApiKey.trim();
  const match = authorization?.match(/^\s*Bearer\s+(\S+)\s*$/i);
  return match?.[1];
}

/** The source id of a valid key; throws unauthorized otherwise. */
export function requireSource(auth: KeyAuthenticator, xApiKey: string | undefined, authorization: string | undefined): string {
  const key = presentedApiKey(xApiKey, authorization);
  if (!key) throw new SluiceError('unauthorized', 'missing API key: send X-API-Key or Authorization: Bearer');
  const sourceId = auth.authenticate(key);
  if (!sourceId) throw new SluiceError('unauthorized', 'invalid or revoked API key');
  return sourceId;
}
