/**
 * Install tokens: a URL an operator can hand to `kubectl apply` or curl, valid 24 hours, that
 * renders an agent manifest carrying a working ingestion key.
 *
 * Creating a token issues a fresh API key for the source (so it can be revoked on its own)
 * and stores that key sealed with the token itself (AES-256-GCM, key derived from the token):
 * the state store holds only the token's SHA-256 and a ciphertext it cannot open, so neither
 * a copy of the store nor its logs reveal a usable key. The token is shown once, like a key.
 * An expired token is deleted when next presented; the key it carried stays valid (agents
 * installed with it keep working) until revoked with `sluice sources revoke-key`. A token is
 * deleted only for what the store says (expired, its key revoked or gone), never because this
 * gateway's watch has not yet brought a key created through another one.
 */
import { createHash, randomBytes } from 'node:crypto';
import { SecretBox } from '../core/secret-box.ts';
import { recordOf } from '../state/shape.ts';
import type { StateStore } from '../state/store.ts';
import type { SourceRegistry } from './sources.ts';

export const INSTALL_TOKEN_TTL_MS = 24 * 60 * 60 * 1000;

const INSTALL_TOKENS = 'install_tokens';
const TOKEN_PREFIX = 'sit_';
const TOKEN_SHAPE = /^sit_[A-Za-z0-9_-]{43}$/;

interface InstallTokenRecord {
  /** Public id, safe to log. */
  id: string;
  sourceId: string;
  /** The API key the token carries. */
  keyId: string;
  createdAt: string;
  expiresAt: string;
  /** base64url(iv ‖ ciphertext ‖ tag) of the API key. */
  sealedKey: string;
}

const isInstallTokenRecord = recordOf<InstallTokenRecord>({
  id: 'string', sourceId: 'string', keyId: 'string', expiresAt: 'string', sealedKey: 'string',
});

export interface IssuedInstallToken {
  id: string;
  token: string;
  sourceId: string;
  keyId: string;
  expiresAt: string;
}

/** What a valid token grants: ingestion into one source. */
export interface InstallGrant {
  tokenId: string;
  sourceId: string;
  apiKey: string;
  expiresAt: string;
}

export class InstallTokens {
  constructor(
    private readonly store: StateStore,
    private readonly sources: SourceRegistry,
    private readonly now: () => number = Date.now,
  ) {}

  /** Issues a token (and the key it carries) for an existing source. */
  async create(sourceId: string): Promise<IssuedInstallToken> {
    const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
    const id = `itk_${randomBytes(6).toString('hex')}`;
    const key = await this.sources.addKey(sourceId, `install token ${id}`);
    const createdAt = this.now();
    const record: InstallTokenRecord = {
      id,
      sourceId,
      keyId: key.keyId,
      createdAt: new Date(createdAt).toISOString(),
      expiresAt: new Date(createdAt + INSTALL_TOKEN_TTL_MS).toISOString(),
      sealedKey: sealingBox(token).seal(key.apiKey),
    };
    await this.store.put(INSTALL_TOKENS, lookupKey(token), record);
    return { id, token, sourceId, keyId: key.keyId, expiresAt: record.expiresAt };
  }

  /** The grant of a valid token; undefined for an unknown, malformed or expired one alike. */
  async redeem(token: string): Promise<InstallGrant | undefined> {
    if (!TOKEN_SHAPE.test(token)) return undefined;
    const lookup = lookupKey(token);
    const record = await this.store.get<unknown>(INSTALL_TOKENS, lookup);
    // A record of the wrong shape is as good as unknown (and left in place for an operator).
    if (!isInstallTokenRecord(record)) return undefined;
    // A revoked key takes the token with it: the manifest would not work anyway. A date that
    // does not parse counts as expired.
    if (!(Date.parse(record.expiresAt) > this.now()) || !(await this.sources.keyActiveInStore(record.keyId))) {
      await this.store.delete(INSTALL_TOKENS, lookup);
      return undefined;
    }
    return { tokenId: record.id, sourceId: record.sourceId, apiKey: sealingBox(token).open(record.sealedKey), expiresAt: record.expiresAt };
  }
}

/** The store key of a token: its SHA-256 (the token itself is never stored). */
function lookupKey(token: string): string {
  return createHash('sha256').update(`lookup:${token}`).digest('hex');
}

/** What seals a token's API key: a key derived from the token, for this use only. */
function sealingBox(token: string): SecretBox {
  return new SecretBox(createHash('sha256').update(`seal:${token}`).digest());
}
