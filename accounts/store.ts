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

/** Emails in use, reserved with an atomic create so two gateways cannot both take one. */
const EMAILS = 'relay_emails';

const now = () => new Date().toISOString();
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

  userByEmail(email: string): User | undefined {
    const wanted = email.trim().toLowerCase();
    return this.users.find((user) => user.email === wanted);
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

  /** Creates a user; undefined when the email is taken (reserved atomically, across gateways). */
  async createUser(tenantId: string, fields: NewUser): Promise<User | undefined> {
    const email = fields.email.trim().toLowerCase();
    const userId = newId('usr');
    if (this.userByEmail(email) || !(await this.state.create(EMAILS, sha256Hex(email), { userId }))) return undefined;
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
