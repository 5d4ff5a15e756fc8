/**
 * The relay module: its store (mirrored from the state store), keys, admin operations and
 * HTTP server on its own port. Started by the roles that serve HTTP (serve, gateway).
 */
import type { SluiceConfig } from '../core/config.ts';
import type { Logger } from '../core/log.ts';
import { clientIpResolver } from '../gateway/client-ip.ts';
import { createHttpServer, listenOn } from '../gateway/http/index.ts';
import { TokenBucketLimiter } from '../gateway/limiter.ts';
import type { StateStore } from '../state/store.ts';
import { RelayAdmin } from './admin.ts';
import { Sessions } from './auth.ts';
import { relayHandler } from './http.ts';
import { relayOpenApiDocument } from './openapi.ts';
import { setWebhookUrlCheck } from './schemas.ts';
import { deriveRelayKeys, loadMasterKey } from './secrets.ts';
import { RelayStore } from './store.ts';
import { isAcceptableWebhookUrl } from './webhook-url.ts';

/** Admin body size: ample for a template (100,000 characters) and its sample data. */
const MAX_ADMIN_BODY_BYTES = 1024 * 1024;
/** Sign-in attempts (login, claim, onboarding) per client IP. */
const SIGN_IN_PER_MINUTE = 10;

export interface RunningRelay {
  port: number;
  store: RelayStore;
  admin: RelayAdmin;
  shutdown(): Promise<void>;
}

/** The store and admin operations without the HTTP server (the CLI uses them directly). */
export async function openRelay(config: Readonly<SluiceConfig>, state: StateStore): Promise<{ store: RelayStore; admin: RelayAdmin; sessions: Sessions }> {
  // A key made up here would differ from the other gateways': secrets sealed with it could not be opened there.
  if (config.nats.url && !config.relay.masterKey) throw new Error('the relay in cluster mode needs SLUICE_RELAY_MASTER_KEY (the same on every gateway)');
  const keys = deriveRelayKeys(await loadMasterKey(config.relay.masterKey, config.dataDir));
  setWebhookUrlCheck((url) => isAcceptableWebhookUrl(url, config.relay.allowPrivateWebhooks));
  const store = new RelayStore(state);
  await store.start();
  const sessions = new Sessions(keys.sessionKey, store);
  return { store, admin: new RelayAdmin(store, keys.secrets, sessions), sessions };
}

export async function startRelay(config: Readonly<SluiceConfig>, state: StateStore, log: Logger): Promise<RunningRelay> {
  const { store, admin, sessions } = await openRelay(config, state);
  const signInLimiter = new TokenBucketLimiter({ ratePerMinute: SIGN_IN_PER_MINUTE, burst: SIGN_IN_PER_MINUTE });
  const openApi = relayOpenApiDocument();
  const handler = relayHandler({
    admin,
    sessions,
    signInLimiter,
    clientIp: clientIpResolver(config.limits.trustedProxies),
    operatorToken: config.relay.operatorToken,
    openApi: () => openApi,
    log,
  });
  const http = createHttpServer(config.http.engine, handler, { maxBodyBytes: MAX_ADMIN_BODY_BYTES }, log);
  let port: number;
  try {
    port = await listenOn(http, config.host, config.relay.port, 'relay port (SLUICE_RELAY_PORT)');
  } catch (err) {
    store.shutdown();
    await signInLimiter.shutdown();
    throw err;
  }
  return {
    port,
    store,
    admin,
    async shutdown() {
      await http.close();
      await signInLimiter.shutdown();
      store.shutdown();
    },
  };
}
