/**
 * The admin side of handing a tenant over (the mechanism is relay/handover.ts): owners make,
 * list and revoke claim tokens, and a claimant redeems one and is signed in as an owner. The
 * handover reads and changes the accounts through the shared context (its compare-and-set).
 */
import { Handovers } from '../handover.ts';
import type { Actor, AdminContext } from './context.ts';
import { userView } from './views.ts';

interface ClaimBody { token: string; email: string; name?: string; password: string }

export class HandoverAdmin {
  private readonly handovers: Handovers;

  constructor(private readonly c: AdminContext) {
    this.handovers = new Handovers(c.store.state, {
      activeOwners: (tenantId) => c.activeOwners(tenantId),
      tenantExists: (tenantId) => c.store.accounts.tenants.get(tenantId) !== undefined,
      emailTaken: (tenantId, email) => c.store.accounts.userInTenant(tenantId, email) !== undefined,
      createOwner: (tenantId, { email, name, password }) => c.putNewUser(tenantId, { email, name, role: 'owner' }, password, false),
      demoteToAdmin: async (userId) => {
        await c.change(c.store.accounts.users, userId, 'User', (current) => ({ ...current, role: current.role === 'owner' ? 'admin' : current.role }));
      },
    });
  }

  /** A single-use claim token with which the tenant's client becomes its owner (POST /api/v1/admin/claim); shown once. */
  create(actor: Actor) {
    this.c.require(actor, 'owner');
    return this.handovers.create(actor.tenantId, actor.userId ?? 'operator');
  }

  /** The tenant's claim tokens that could still be redeemed (never the tokens themselves). */
  list(actor: Actor) {
    this.c.require(actor, 'owner');
    return this.handovers.list(actor.tenantId);
  }

  revoke(actor: Actor, claimId: string) {
    this.c.require(actor, 'owner');
    return this.handovers.revoke(actor.tenantId, claimId);
  }

  /** Redeems a claim: the claimant becomes an owner, the owners who handed over become admins. */
  async claim(body: unknown) {
    const input = this.c.validateBody<ClaimBody>('ClaimTenant', body);
    const user = await this.handovers.redeem(input.token, { email: input.email.toLowerCase(), name: input.name ?? '', password: input.password });
    return { tenant: this.c.store.accounts.tenants.get(user.tenantId), ...(await this.c.sessions.issue(user)), user: userView(user) };
  }
}
