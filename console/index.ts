/**
 * The web console: a single-page app on a port of its own (its own origin) and the private API
 * it talks to. It wires nothing itself: the composition root gives it the accounts, the state
 * store, the sources, storage reads, the built app and the sign-in limiter, and serves the
 * handler on the console port.
 */
import { hkdfSync } from 'node:crypto';
import type { AccountStore, TenantUsers } from '../accounts/index.ts';
import type { ByteBudget } from '../core/byte-budget.ts';
import type { Logger } from '../core/log.ts';
import type { ClientIpResolver } from '../gateway/client-ip.ts';
import type { HttpHandler } from '../gateway/http/adapter.ts';
import type { InstallTokens } from '../gateway/install-tokens.ts';
import type { Limiter } from '../gateway/limiter.ts';
import type { SignInLockout } from '../gateway/sign-in-lockout.ts';
import type { SourceRegistry } from '../gateway/sources.ts';
import type { DevelopmentInbox } from '../delivery/index.ts';
import type { StateStore } from '../state/store.ts';
import type { ConsoleAssets } from './ui/build.ts';
import { Dashboards } from './dashboards.ts';
import { FirstRun } from './first-run.ts';
import { ReadGate } from '../core/read-gate.ts';
import type { ConsoleAlerts, RelayConsole } from './route.ts';
import { consoleHandler } from './http.ts';
import type { ConsoleReads } from './reads.ts';
import { ConsoleSessions } from './sessions.ts';

/** Body size on the console port: ample for a dashboard of 24 charts; past it, 413. */
export const MAX_CONSOLE_BODY_BYTES = 256 * 1024;

export interface ConsoleParts {
  accounts: AccountStore;
  state: StateStore;
  /** 32 bytes, the same on every gateway (SLUICE_RELAY_MASTER_KEY): session and CSRF keys derive from it. */
  masterKey: Buffer;
  sources: SourceRegistry;
  installTokens: InstallTokens;
  reads: ConsoleReads;
  assets: ConsoleAssets;
  signInLimiter: Limiter;
  /** Sign-in attempts per account (shared with the relay's sign-in). */
  signInLockout: SignInLockout;
  clientIp: ClientIpResolver;
  budget: ByteBudget;
  log: Logger;
  /** SLUICE_CONSOLE_PUBLIC_URL, or '' for the loopback names of the bound port. */
  publicUrl: string;
  /** Where telemetry goes: the OTLP/HTTP base URL (also the agent API's), the OTLP/gRPC one (known once their ports are bound). */
  ingest: () => { otlpHttp: string; otlpGrpc: string };
  /** The development inbox, when SLUICE_DELIVERY_INBOX is on: its page shows the tenant's messages. */
  inbox?: Pick<DevelopmentInbox, 'list'>;
  /** The turns of the reads (the alert evaluator's measures take them too); one of its own when absent. */
  readGate?: ReadGate;
  /** Alert rules, where the relay runs beside the console. */
  alerts?: ConsoleAlerts;
  /** The tenant's users and their invitations (started by the composition root). */
  users: TenantUsers;
  /** The relay's admin API as the signed-in user and its public URL, where the relay runs beside the console. */
  relay?: RelayConsole;
}

export interface Console {
  handler: HttpHandler;
  /** Call once the port is bound: the URL users open, and the origins the API answers. */
  bind(port: number): string;
  /** The one-time link for the first owner, while the default tenant has none. */
  firstRunLink(): Promise<string | undefined>;
}

export function openConsole(parts: ConsoleParts): Console {
  const derive = (info: string) => new Uint8Array(hkdfSync('sha256', parts.masterKey, Buffer.alloc(0), info, 32));
  const secure = parts.publicUrl.startsWith('https://');
  const sessions = new ConsoleSessions({ session: derive('sluice console sessions v1'), csrf: derive('sluice console csrf v1') }, parts.accounts, parts.state, secure);
  const firstRun = new FirstRun(parts.accounts, parts.state);
  let baseUrl = '';
  let origins = new Set<string>();
  const handler = consoleHandler({
    ...parts,
    sessions,
    firstRun,
    dashboards: new Dashboards(parts.state),
    readGate: parts.readGate ?? new ReadGate(),
    isConsoleOrigin: (origin) => origins.has(origin),
    consoleUrl: () => baseUrl,
  });
  return {
    handler,
    bind(port) {
      baseUrl = (parts.publicUrl || `http://localhost:${port}`).replace(/\/+$/, '');
      origins = new Set(parts.publicUrl ? [new URL(baseUrl).origin] : [`http://localhost:${port}`, `http://127.0.0.1:${port}`, `http://[::1]:${port}`]);
      return baseUrl;
    },
    async firstRunLink() {
      const token = await firstRun.offer();
      // In the fragment: it never reaches a server log, a proxy or a Referer.
      return token === undefined ? undefined : `${baseUrl}/first-run#token=${token}`;
    },
  };
}
