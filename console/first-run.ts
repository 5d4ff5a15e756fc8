/**
 * The first owner: while the default tenant (the one ingestion sources without a tenant belong
 * to) has no active owner, each start of the console makes a one-time sign-in link and the
 * server prints it. Whoever opens it chooses their email and password and becomes that owner.
 * The token is stored hashed, lasts 24 hours, is replaced by the next start's, and works once:
 * its use is recorded with an atomic create, so two claims racing cannot both win.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256Hex } from '../core/hash.ts';
import type { AccountStore, User } from '../accounts/index.ts';
import { ApiError } from '../core/errors.ts';
import type { StateStore } from '../state/store.ts';

const OFFERS = 'console_first_run';
const USES = 'console_first_run_uses';
const OFFER_KEY = 'owner';
const OFFER_HOURS = 24;

interface Offer {
  hash: string;
  expiresAt: string;
}

export class FirstRun {
  constructor(private readonly accounts: AccountStore, private readonly state: StateStore) {
    state.expireAfter(USES, OFFER_HOURS * 3600_000);
  }

  /** Whether the default tenant still waits for its first owner. */
  async open(): Promise<boolean> {
    const tenant = await this.accounts.defaultTenant();
    return this.accounts.activeOwners(tenant.id).length === 0;
  }

  /** A new one-time token (the older one stops working), or undefined when the owner exists. */
  async offer(): Promise<string | undefined> {
    if (!(await this.open())) return undefined;
    const token = `frt_${randomBytes(24).toString('base64url')}`;
    const offer: Offer = { hash: sha256Hex(token), expiresAt: new Date(Date.now() + OFFER_HOURS * 3600_000).toISOString() };
    await this.state.put(OFFERS, OFFER_KEY, offer);
    return token;
  }

  /** Makes the owner the token was offered for; 404 for a wrong, used or expired token, 409 for a taken email. */
  async redeem(input: { token: string; name: string; email: string; password: string }): Promise<User> {
    const invalid = new ApiError(404, 'This sign-in link is not valid any more: restart the server for a new one, or sign in');
    const offer = await this.state.get<Offer>(OFFERS, OFFER_KEY);
    const presented = Buffer.from(sha256Hex(input.token));
    if (!offer || Date.parse(offer.expiresAt) <= Date.now() || !timingSafeEqual(presented, Buffer.from(offer.hash)) || !(await this.open())) {
      throw invalid;
    }
    const tenant = await this.accounts.defaultTenant();
    if (this.accounts.userInTenant(tenant.id, input.email)) throw new ApiError(409, 'A user with this email already exists');
    if (!(await this.state.create(USES, offer.hash, { usedAt: new Date().toISOString() }))) throw invalid;
    await this.state.delete(OFFERS, OFFER_KEY);
    const user = await this.accounts.createUser(tenant.id, { email: input.email, name: input.name, role: 'owner', password: input.password, oneTime: false });
    if (!user) throw new ApiError(409, 'A user with this email already exists');
    return user;
  }
}
