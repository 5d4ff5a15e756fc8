/**
 * Tenants and users in the state store (local files embedded, NATS KV in a cluster), mirrored
 * in memory on every gateway: sign-in and every session check read memory, and a change made
 * on one gateway (a deactivated user) reaches the others within the watch's latency.
 *
 * The buckets keep the names they had when only the relay had accounts (`relay_tenants`,
 * `relay_users`, `relay_emails`), so stored accounts carry over unchanged.
 */
import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../core/hash.ts';
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { Collection } from '../state/collection.ts';
import type { StateStore } from '../state/store.ts';
import { DEFAULT_TENANT_ID, type Role, type Tenant, type User } from './model.ts';
import { hashPassword } from './passwords.ts';

/**
 * Emails in use, one reservation per tenant and email (an atomic create, so two gateways cannot
 * both take one). An email is unique within its tenant only: whether it has an account in
 * another tenant is none of this tenant's business. (Before 2026-11-28 the key was the email
 * alone; those reservations stay and are harmless, the mirror check below covers their users.)
 */
const EMAILS = 'relay_emails';
const emailKey = (tenantId: string, email: string) => sha256Hex(`${tenantId}\n${email}`);

const now = () => new Date().toISOString();
const normalEmail = (email: string) => email.trim().toLowerCase();
export const newId = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`;

export interface NewUser {
  email: string;
  name: string;
  role: Role;
  password: string;
  /** A one-time password: the user must change it first. */
  oneTime: boolean;
}

export class AccountStore {
  readonly tenants: Collection<Tenant>;
  readonly users: Collection<User>;

  constructor(readonly state: StateStore, log?: Logger) {
    const stamped = { createdAt: 'string', updatedAt: 'string' } as const;
    this.tenants = new Collection(state, 'relay_tenants', { ...stamped, name: 'string' }, log);
    this.users = new Collection(state, 'relay_users', {
      ...stamped, tenantId: 'string', email: 'string', name: 'string', role: 'string', active: 'boolean',
      passwordHash: 'string', mustChangePassword: 'boolean', sessionVersion: 'number',
    }, log);
  }

  async start(): Promise<void> {
    await this.tenants.start();
    await this.users.start();
  }

  shutdown(): void {
    this.tenants.stop();
    this.users.stop();
  }

  /** Each collection's health by bucket, for readiness (`state.relay_tenants`...). */
  statuses(): Record<string, ComponentStatus> {
    return { [this.tenants.bucket]: this.tenants.status(), [this.users.bucket]: this.users.status() };
  }

  /** The accounts of this email: at most one per tenant. */
  usersByEmail(email: string): User[] {
    const wanted = normalEmail(email);
    return this.users.filter((user) => user.email === wanted);
  }

  userInTenant(tenantId: string, email: string): User | undefined {
    const wanted = normalEmail(email);
    return this.users.find((user) => user.tenantId === tenantId && user.email === wanted);
  }

  /** The tenant's active owners (a tenant keeps at least one: accounts/tenant-users.ts). */
  activeOwners(tenantId: string): User[] {
    return this.users.filter((user) => user.tenantId === tenantId && user.role === 'owner' && user.active);
  }

  /** The active user and their tenant, or undefined when either is gone or the user is deactivated. */
  activeUser(userId: string): { user: User; tenant: Tenant } | undefined {
    const user = this.users.get(userId);
    const tenant = user?.active ? this.tenants.get(user.tenantId) : undefined;
    return user && tenant ? { user, tenant } : undefined;
  }

  /** The default tenant (model.ts), created on first need. */
  async defaultTenant(): Promise<Tenant> {
    return this.tenants.get(DEFAULT_TENANT_ID)
      ?? await this.tenants.modify(DEFAULT_TENANT_ID, (current) => current ?? { id: DEFAULT_TENANT_ID, name: 'Default', createdAt: now(), updatedAt: now() });
  }

  /** Creates a user; undefined when the email is taken in the tenant (reserved atomically, across gateways). */
  async createUser(tenantId: string, fields: NewUser): Promise<User | undefined> {
    const email = normalEmail(fields.email);
    const userId = newId('usr');
    if (this.userInTenant(tenantId, email) || !(await this.state.create(EMAILS, emailKey(tenantId, email), { userId }))) return undefined;
    return this.users.put({
      id: userId,
      tenantId,
      email,
      name: fields.name,
      role: fields.role,
      active: true,
      passwordHash: await hashPassword(fields.password),
      mustChangePassword: fields.oneTime,
      sessionVersion: 1,
      createdAt: now(),
      updatedAt: now(),
    });
  }
}
