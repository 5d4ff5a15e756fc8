/**
 * The relay module: its store (mirrored from the state store), keys, admin operations and the
 * handler of its HTTP API. It wires nothing itself: the composition root (bin/) gives it the
 * state store, the master key, the deployment's checks and the sign-in limiter, and serves the
 * handler on the relay port.
 */
import type { Logger } from '../core/log.ts';
import type { ClientIpResolver } from '../gateway/client-ip.ts';
import type { HttpHandler } from '../gateway/http/adapter.ts';
import type { Limiter } from '../gateway/limiter.ts';
import type { StateStore } from '../state/store.ts';
import { RelayAdmin } from './admin.ts';
import { Sessions } from './auth.ts';
import { relayHandler } from './http.ts';
import { relayOpenApiDocument } from './openapi.ts';
import { createBodyValidator, type BodyChecks } from './schemas.ts';
import { deriveRelayKeys } from './secrets.ts';
import { RelayStore } from './store.ts';

export { loadMasterKey } from './secrets.ts';
export { isAcceptableWebhookUrl } from './webhook-url.ts';

/** Admin body size: ample for a template (100,000 characters) and its sample data. */
export const MAX_ADMIN_BODY_BYTES = 1024 * 1024;
/** Sign-in attempts (login, claim, onboarding) per client IP and minute. */
export const SIGN_IN_PER_MINUTE = 10;

export interface RelayParts {
  state: StateStore;
  log: Logger;
  /** 32 bytes: seals stored secrets and signs sessions; the same on every gateway. */
  masterKey: Buffer;
  checks: BodyChecks;
}

export interface Relay {
  store: RelayStore;
  admin: RelayAdmin;
  sessions: Sessions;
  shutdown(): void;
}

/** Opens the relay's store (its mirrors start) and admin operations. */
export async function openRelay(parts: RelayParts): Promise<Relay> {
  const keys = deriveRelayKeys(parts.masterKey);
  const store = new RelayStore(parts.state, parts.log);
  await store.start();
  const sessions = new Sessions(keys.sessionKey, store);
  const admin = new RelayAdmin(store, keys.secrets, sessions, createBodyValidator(parts.checks));
  return { store, admin, sessions, shutdown: () => store.shutdown() };
}

export interface RelayHttpParts {
  /** Guards login, claim and onboarding against guessing (per client IP). */
  signInLimiter: Limiter;
  clientIp: ClientIpResolver;
  /** SLUICE_RELAY_OPERATOR_TOKEN: enables POST /api/v1/admin/tenants when set. */
  operatorToken: string;
  log: Logger;
}

/** The relay port's handler: the admin API, its OpenAPI document and health. */
export function relayHttpHandler(relay: Relay, parts: RelayHttpParts): HttpHandler {
  const openApi = relayOpenApiDocument();
  return relayHandler({ ...parts, admin: relay.admin, sessions: relay.sessions, openApi: () => openApi });
}
