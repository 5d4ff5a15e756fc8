/**
 * Handing a tenant over to its client: an owner makes a claim token, the client redeems it and
 * becomes an owner, and the owners who handed over become admins (the new owner decides whether
 * they stay). A token works once, expires after CLAIM_TTL_HOURS, can be listed and revoked, and
 * stops working as soon as ownership moves: every tenant counts its handovers (a generation,
 * moved forward by compare-and-set when a claim is redeemed), a claim names the generation it
 * was made in, and a claim whose maker is no longer an active owner is void too. So a claim
 * kept back by the old owner cannot take the tenant back.
 */
import { randomBytes } from 'node:crypto';
import { newId, type User } from '../accounts/index.ts';
import { sha256Hex } from '../core/hash.ts';
import type { StateStore } from '../state/store.ts';
import { conflict, notFound, RelayError } from './errors.ts';

export const CLAIM_TTL_HOURS = 72;
/** Claim tokens a tenant may have outstanding at once. */
export const MAX_OPEN_CLAIMS = 10;

/** Claims by the hash of their token; they expire by themselves. */
const CLAIMS = 'relay_claims';
/** Each tenant's handover generation: { generation }, by tenant id. */
const GENERATIONS = 'relay_handover_generations';

interface Claim {
  id: string;
  tenantId: string;
  /** The owner's user id, or `operator` (made at the command line). */
  createdBy: string;
  createdAt: string;
  expiresAt: string;
  /** The tenant's handover generation when the claim was made: it is good for that one only (absent: 0, a claim made before generations). */
  generation?: number;
}

/** What the admin shows of a claim (never its token). */
export type ClaimView = Omit<Claim, 'tenantId' | 'generation'>;

/** The accounts a handover reads and changes (the admin's, relay/admin/context.ts, with its compare-and-set). */
export interface HandoverAccounts {
  activeOwners(tenantId: string): User[];
  tenantExists(tenantId: string): boolean;
  emailTaken(tenantId: string, email: string): boolean;
  createOwner(tenantId: string, fields: { email: string; name: string; password: string }): Promise<User>;
  demoteToAdmin(userId: string): Promise<void>;
}

const claimView = ({ tenantId: _t, generation: _g, ...view }: Claim): ClaimView => view;

export class Handovers {
  constructor(private readonly state: StateStore, private readonly accounts: HandoverAccounts, private readonly clock: () => number = Date.now) {
    state.expireAfter(CLAIMS, CLAIM_TTL_HOURS * 3600_000);
  }

  /** A new claim token for the tenant, shown this once (stored hashed); 409 past MAX_OPEN_CLAIMS. */
  async create(tenantId: string, createdBy: string): Promise<{ claimToken: string; id: string; expiresAt: string }> {
    const { claims, generation } = await this.open(tenantId);
    if (claims.length >= MAX_OPEN_CLAIMS) {
      throw conflict(`A tenant has at most ${MAX_OPEN_CLAIMS} open claim tokens: revoke one first (DELETE /api/v1/admin/tenant/handover/<id>)`);
    }
    const token = `rct_${randomBytes(32).toString('base64url')}`;
    const claim: Claim = {
      id: newId('clm'),
      tenantId,
      createdBy,
      createdAt: new Date(this.clock()).toISOString(),
      expiresAt: new Date(this.clock() + CLAIM_TTL_HOURS * 3600_000).toISOString(),
      generation,
    };
    await this.state.put(CLAIMS, sha256Hex(token), claim);
    return { claimToken: token, id: claim.id, expiresAt: claim.expiresAt };
  }

  /** The tenant's claims that could still be redeemed, oldest first. */
  async list(tenantId: string): Promise<ClaimView[]> {
    return (await this.open(tenantId)).claims.map(([, claim]) => claimView(claim)).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /** Revokes one of the tenant's claims; 404 for any other id. */
  async revoke(tenantId: string, claimId: string): Promise<void> {
    const found = (await this.open(tenantId)).claims.find(([, claim]) => claim.id === claimId);
    if (!found) throw notFound('Claim');
    await this.state.delete(CLAIMS, found[0]);
  }

  /**
   * Redeems a token: moves the tenant's generation forward (only one redemption of a generation
   * wins, on every gateway), makes the claimant an owner, demotes the other owners and drops the
   * tenant's other claims. Returns the new owner.
   */
  async redeem(token: string, claimant: { email: string; name: string; password: string }): Promise<User> {
    const invalid = new RelayError(404, 'Claim token not found or expired');
    const key = sha256Hex(token);
    const claim = await this.state.get<Claim>(CLAIMS, key);
    if (!claim || !this.valid(claim, await this.generation(claim.tenantId))) throw invalid;
    if (this.accounts.emailTaken(claim.tenantId, claimant.email)) throw conflict('A user with this email already exists');
    if (!(await this.advance(claim))) throw invalid;
    await this.dropClaims(claim.tenantId);
    // The new owner first: the tenant is never left without one.
    const user = await this.accounts.createOwner(claim.tenantId, claimant);
    for (const owner of this.accounts.activeOwners(claim.tenantId)) {
      if (owner.id !== user.id) await this.accounts.demoteToAdmin(owner.id);
    }
    return user;
  }

  /** The tenant's current generation, and its claims that are valid in it (by store key). */
  private async open(tenantId: string): Promise<{ generation: number; claims: Array<[string, Claim]> }> {
    const generation = await this.generation(tenantId);
    const claims = (await this.state.list<Claim>(CLAIMS)).filter(([, claim]) => claim.tenantId === tenantId && this.valid(claim, generation));
    return { generation, claims };
  }

  /** In date, of the tenant's current `generation`, and made by an active owner (or the operator). */
  private valid(claim: Claim, generation: number): boolean {
    if (Date.parse(claim.expiresAt) <= this.clock() || !this.accounts.tenantExists(claim.tenantId)) return false;
    if ((claim.generation ?? 0) !== generation) return false;
    return claim.createdBy === 'operator' || this.accounts.activeOwners(claim.tenantId).some((owner) => owner.id === claim.createdBy);
  }

  private async generation(tenantId: string): Promise<number> {
    return (await this.state.get<{ generation: number }>(GENERATIONS, tenantId))?.generation ?? 0;
  }

  /** Moves the tenant's generation from the claim's to the next: false when another redemption got there first. */
  private async advance(claim: Claim): Promise<boolean> {
    const made = claim.generation ?? 0;
    const next = { generation: made + 1 };
    const current = await this.state.getVersioned<{ generation: number }>(GENERATIONS, claim.tenantId);
    if (!current) return made === 0 && (await this.state.create(GENERATIONS, claim.tenantId, next)) !== undefined;
    return current.value.generation === made && (await this.state.update(GENERATIONS, claim.tenantId, next, current.revision)) !== undefined;
  }

  /** Removes every claim of the tenant (void already: their generation has passed). */
  private async dropClaims(tenantId: string): Promise<void> {
    for (const [key, claim] of await this.state.list<Claim>(CLAIMS)) {
      if (claim.tenantId === tenantId) await this.state.delete(CLAIMS, key);
    }
  }
}
