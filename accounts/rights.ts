/**
 * Who may do what, once for the console and the relay's admin API. Every route of both names
 * the right it needs; its front end checks the signed-in user's role against this table before
 * the route runs, and answers 403 with the right's message otherwise.
 */
import type { Role } from './model.ts';

export const RIGHTS = {
  /** One's own session and password. */
  self: 'member',
  /** The tenant's telemetry, sources, dashboards, relay configuration, submissions and jobs. */
  read: 'member',
  /** Change what the tenant configures: sources and keys, dashboards, sites, forms, templates and their previews, delivery settings, API keys; retry jobs. */
  configure: 'admin',
  /** Invite and change users. Only owners make or change owners: the relay's admin checks the target's role too. */
  manageUsers: 'admin',
  /** The tenant itself: its name and its handover. */
  own: 'owner',
} as const satisfies Record<string, Role>;

export type Right = keyof typeof RIGHTS;

const RANK: Record<Role, number> = { member: 0, admin: 1, owner: 2 };

export function mayDo(role: Role, right: Right): boolean {
  return RANK[role] >= RANK[RIGHTS[right]];
}

/** The refusal's message when `role` lacks a right that needs `needed`. */
export function refusalMessage(needed: Role): string {
  return needed === 'owner' ? 'Only an owner may do this' : 'Members have read-only access';
}
