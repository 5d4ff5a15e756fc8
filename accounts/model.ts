/**
 * Who uses Sluice: tenants and their users, shared by the relay and the console. Ingestion
 * sources, relay sites and everything under them belong to one tenant; a user sees only theirs.
 */
export type Role = 'owner' | 'admin' | 'member';
export const ROLES: readonly Role[] = ['owner', 'admin', 'member'];

export interface Stamped {
  id: string;
  createdAt: string;
  updatedAt: string;
}

export interface Tenant extends Stamped {
  name: string;
}

export interface User extends Stamped {
  tenantId: string;
  /** Lower case; unique within the tenant. The same email may have an account in other tenants (accounts/sign-in.ts). */
  email: string;
  name: string;
  role: Role;
  active: boolean;
  passwordHash: string;
  /** Set for a one-time password: the session may only change the password. */
  mustChangePassword: boolean;
  /** Bumped on password change and deactivation: older sessions stop working. */
  sessionVersion: number;
}

/**
 * The tenant that owns what was made before tenants reached ingestion: sources without a
 * tenant are moved to it (accounts/store.ts#adoptSources), and the console's first owner joins it.
 */
export const DEFAULT_TENANT_ID = 'ten_default';
