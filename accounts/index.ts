/**
 * Accounts: tenants, users, passwords and sessions, one model for the relay and the console.
 * The composition root opens the store once and hands it to both.
 */
export { DEFAULT_TENANT_ID, ROLES, type Role, type Stamped, type Tenant, type User } from './model.ts';
export { AccountStore, newId, type NewUser } from './store.ts';
export { checkPassword, hashPassword, oneTimePassword } from './passwords.ts';
export { CHOOSE_TENANT_MESSAGE, signIn, type SignInOutcome } from './sign-in.ts';
export { MAX_SESSIONS_PER_USER, SESSION_HOURS, Sessions, type Session, type SessionClaims } from './sessions.ts';
export { mayDo, refusalMessage, RIGHTS, type Right } from './rights.ts';
export { changeUser, INVITATION_DAYS, MAX_OPEN_INVITATIONS, requireRightsOver, TenantUsers, type Invitation, type Manager } from './tenant-users.ts';
