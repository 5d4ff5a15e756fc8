/**
 * What a console route is: its method and path, who may call it, and what it is given. Apart
 * from http.ts (which runs the routes) so that the route lists (routes.ts) and the server do not
 * import each other.
 */
import type { ByteBudget } from '../core/byte-budget.ts';
import type { Logger } from '../core/log.ts';
import type { ClientIpResolver } from '../gateway/client-ip.ts';
import type { HttpRequest } from '../gateway/http/adapter.ts';
import type { Limiter } from '../gateway/limiter.ts';
import type { SignInLockout } from '../gateway/sign-in-lockout.ts';
import type { InstallTokens } from '../gateway/install-tokens.ts';
import type { SourceRegistry } from '../gateway/sources.ts';
import type { AccountStore, Right, TenantUsers, User } from '../accounts/index.ts';
import type { ConsoleAssets } from './ui/build.ts';
import type { Dashboards } from './dashboards.ts';
import type { FirstRun } from './first-run.ts';
import type { ConsoleReads } from './reads.ts';
import type { ReadGate } from '../core/read-gate.ts';
import type { ConsoleSessions, SignedIn } from './sessions.ts';
import type { DevelopmentInbox } from '../delivery/index.ts';
import type { AlertEvaluator, AlertRules, Silences } from '../alerts/index.ts';
import type { ContactPoint } from './api.ts';

/** Alert rules, silences and their states, where the relay runs beside the console (it delivers the notifications). */
export interface ConsoleAlerts {
  rules: AlertRules;
  silences: Silences;
  evaluator: Pick<AlertEvaluator, 'status'>;
  /** The tenant's active forms, which rules may name in `notify`. */
  contactPoints(tenantId: string): ContactPoint[];
}

export interface ConsoleHttpDeps {
  accounts: AccountStore;
  sessions: ConsoleSessions;
  firstRun: FirstRun;
  sources: SourceRegistry;
  installTokens: InstallTokens;
  dashboards: Dashboards;
  reads: ConsoleReads;
  /** Turns of the reads: a few at once in the process and per tenant. */
  readGate: ReadGate;
  /** The built app: its files by URL path. */
  assets: ConsoleAssets;
  /** Whether the API answers this Origin: the console's own only (known once its port is bound). */
  isConsoleOrigin: (origin: string) => boolean;
  /** Where telemetry goes (the empty states' setup lines, install commands). */
  ingest: () => { otlpHttp: string; otlpGrpc: string };
  /** Guards sign-in and first-run against guessing (per client IP; shared with the relay's sign-in). */
  signInLimiter: Limiter;
  /** Sign-in attempts per account, wherever they come from (shared with the relay's sign-in). */
  signInLockout: SignInLockout;
  clientIp: ClientIpResolver;
  budget: ByteBudget;
  log: Logger;
  /** The development inbox, when SLUICE_DELIVERY_INBOX is on. */
  inbox?: Pick<DevelopmentInbox, 'list'>;
  alerts?: ConsoleAlerts;
  /** The tenant's users and their invitations. */
  users: TenantUsers;
  /** Where the relay runs beside the console: its admin API as the signed-in user (`/api/relay/…`), and its public URL. */
  relay?: RelayConsole;
  /** The URL users open the console at (known once the port is bound): invitation links start with it. */
  consoleUrl: () => string;
}

/**
 * The relay's admin API (relay/http.ts relayAdminBridge) called as a user: its own routes and
 * rights, `path` under its /api/v1/admin. The console forwards `/api/relay/…` to it.
 */
export type RelayAdminCall = (user: User, call: { method: string; path: string; query: string; body: unknown }) => Promise<{ status: number; body: unknown }>;

/** What the console has of the relay where both run. */
export interface RelayConsole {
  admin: RelayAdminCall;
  /** Where pages post submissions (SLUICE_RELAY_PUBLIC_URL, or the relay port's), known once it is bound. */
  url: () => string;
}

/** What a route is given. */
export interface Call {
  request: HttpRequest;
  params: Record<string, string>;
  body: unknown;
  /** The signed-in user (every route but the open ones). */
  session: SignedIn;
  /** The tenant's SourceIds, looked up once per call. */
  sourceIds(): Promise<string[]>;
}

/** Who may call a route: anyone (sign-in, first run; limited per client), or a signed-in user with a right (accounts/rights.ts). */
export type Access = 'open' | Right;
export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  pattern: string;
  access: Access;
  run: (call: Call) => Promise<unknown> | unknown;
  /** Success status (200 unless given). */
  status?: number;
}

