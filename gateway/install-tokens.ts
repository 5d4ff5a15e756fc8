/**
 * Install tokens: a URL an operator can hand to `kubectl apply` or curl, valid 24 hours, that
 * renders an agent manifest carrying a working ingestion key.
 *
 * Creating a token issues a fresh API key for the source (so it can be revoked on its own)
 * and stores that key sealed with the token itself (AES-256-GCM, key derived from the token):
 * the state store holds only the token's SHA-256 and a ciphertext it cannot open, so neither
 * a copy of the store nor its logs reveal a usable key. The token is shown once, like a key.
 *
 * The key expires with the token unless the token is used: the first manifest served settles
 * it (sources.ts#settleKey), and from then it stays valid (agents installed with it keep working)
 * until revoked with `sluice sources revoke-key`. A token never used leaves nothing that works:
 * its key was never outside the store, and stops authenticating when the token expires. Token
 * records leave the store when they expire (the bucket's expiry), and an expired one presented
 * before that is deleted. A token is deleted only for what the store says (expired, its key
 * revoked or gone), never because this gateway's watch has not yet brought a key created
 * through another one.
 *
 * A source has at most MAX_INSTALL_TOKENS_PER_SOURCE tokens not yet expired (the cap held
 * across gateways like the key cap, state/cap-ledger.ts), and each token's key counts against
 * the key cap until the key is revoked or expires.
 */
import { createHash, randomBytes } from 'node:crypto';
import { SecretBox } from '../core/secret-box.ts';
import { CapLedger, type MemberState } from '../state/cap-ledger.ts';
import { recordOf } from '../state/shape.ts';
import type { StateStore } from '../state/store.ts';
import { CapReachedError, NotFoundError, type SourceRegistry } from './sources.ts';

export const INSTALL_TOKEN_TTL_MS = 24 * 60 * 60 * 1000;
/** Install tokens of a source not yet expired (used or not); past it a new one is refused. Below the key cap: each token holds a key. */
export const MAX_INSTALL_TOKENS_PER_SOURCE = 10;

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
  private readonly ledger: CapLedger;

  constructor(
    private readonly store: StateStore,
    private readonly sources: SourceRegistry,
    private readonly now: () => number = Date.now,
  ) {
    // Written once, at creation: the store removes a record when its token expires.
    store.expireAfter(INSTALL_TOKENS, INSTALL_TOKEN_TTL_MS);
    this.ledger = new CapLedger(store, now);
  }

  /**
   * Issues a token, and the key it carries, for an existing source. Refused (CapReachedError)
   * past MAX_INSTALL_TOKENS_PER_SOURCE, or when the source has no room for another key.
   */
  async create(sourceId: string): Promise<IssuedInstallToken> {
    if (!(await this.sources.getSource(sourceId))) throw new NotFoundError(`no source ${sourceId}`);
    const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
    const id = `itk_${randomBytes(6).toString('hex')}`;
    const createdAt = this.now();
    const expiresAt = new Date(createdAt + INSTALL_TOKEN_TTL_MS).toISOString();
    await this.ledger.claim(`install_tokens/${sourceId}`, id, {
      cap: MAX_INSTALL_TOKENS_PER_SOURCE,
      until: Date.parse(expiresAt),
      members: () => this.outstanding(sourceId),
      refuse: (cap) => new CapReachedError(`A source may have at most ${cap} install tokens that have not expired, and this one has ${cap}: use one of them, or wait until one expires (24 hours after it was made)`),
    });
    const key = await this.sources.addKey(sourceId, { label: `install token ${id}`, expiresAt });
    const record: InstallTokenRecord = {
      id,
      sourceId,
      keyId: key.keyId,
      createdAt: new Date(createdAt).toISOString(),
      expiresAt,
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
    // does not parse counts as expired. Serving the key settles it: it no longer expires.
    if (!(Date.parse(record.expiresAt) > this.now()) || !(await this.sources.settleKey(record.keyId))) {
      await this.store.delete(INSTALL_TOKENS, lookup);
      return undefined;
    }
    return { tokenId: record.id, sourceId: record.sourceId, apiKey: sealingBox(token).open(record.sealedKey), expiresAt: record.expiresAt };
  }

  /** The source's tokens as members of its cap: ended when expired (a date that does not parse counts as expired). */
  private async outstanding(sourceId: string): Promise<Map<string, MemberState>> {
    const records = (await this.store.list<unknown>(INSTALL_TOKENS)).map(([, r]) => r).filter(isInstallTokenRecord);
    return new Map(records.filter((r) => r.sourceId === sourceId).map((r) => [r.id, { ended: !(Date.parse(r.expiresAt) > this.now()) }]));
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
