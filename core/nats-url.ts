/**
 * NATS_URL read once for both NATS clients of a process: nats.js (streams, KV, control) and the
 * bus's own connection for its publishes and pulls (bus/nats-direct.ts). Its comma-separated
 * servers may carry credentials as nats-server's own URLs do: `user:password@host` or
 * `token@host`. nats.js 3.x ignores credentials in a server URL, so they are taken out here and
 * handed to it as connect options: one set for every server, which is all nats.js can send, so
 * servers that carry different credentials are refused; so are tls:// beside nats:// servers
 * (nats.js requires TLS of all servers or none).
 */
import { redactUrl } from './redact.ts';

export interface NatsCredentials {
  user?: string;
  pass?: string;
  token?: string;
}

export interface NatsServer {
  host: string;
  port: number;
  /** tls://: the connection must be TLS (nats.js upgrades on the server's INFO either way). */
  tls: boolean;
  /** `host:port` for nats.js: no scheme, no credentials. */
  hostPort: string;
  /** The entry as logs and errors show it: no password, a token as `***` (core/redact.ts). */
  shown: string;
}

export interface NatsServers {
  servers: NatsServer[];
  /** The credentials of every server that carries any; the same for all of them. */
  credentials: NatsCredentials;
  /** Every server is tls://. */
  tls: boolean;
}

/** A server entry as a URL: nats.js also takes `host:port` without a scheme, read as nats://. */
function natsServerUrl(entry: string): string {
  return entry.includes('://') ? entry : `nats://${entry}`;
}

/**
 * NATS_URL's servers and their credentials. Throws, without the value (it may hold a password),
 * when a server does not parse or the servers disagree; core/config.ts names the option.
 */
export function parseNatsUrl(natsUrl: string): NatsServers {
  const entries = natsUrl.split(',').map((entry) => entry.trim()).filter(Boolean);
  if (entries.length === 0) throw new Error('names no server');
  const servers: NatsServer[] = [];
  let credentials: NatsCredentials | undefined;
  for (const entry of entries) {
    let url: URL;
    try {
      url = new URL(natsServerUrl(entry));
    } catch {
      throw new Error('must be a valid URL (the value is not shown: it may hold a password)');
    }
    if (url.protocol !== 'nats:' && url.protocol !== 'tls:') throw new Error(`a server's scheme is ${url.protocol}//; use nats:// or tls://`);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port || 4222);
    servers.push({ host, port, tls: url.protocol === 'tls:', hostPort: `${url.hostname}:${port}`, shown: redactUrl(url.href) });
    const carried = credentialsOf(url);
    if (carried?.pass !== undefined && carried.user === undefined) throw new Error('a server has a password but no user name');
    if (carried === undefined) continue;
    if (credentials !== undefined && !sameCredentials(credentials, carried)) {
      throw new Error('its servers carry different credentials; give every server the same ones (one set is sent to all of them)');
    }
    credentials = carried;
  }
  const tls = servers[0]!.tls;
  if (servers.some((server) => server.tls !== tls)) throw new Error('give every server the same scheme, tls:// or nats://');
  return { servers, credentials: credentials ?? {}, tls };
}

/** `user:password@` or `token@` (a user without a password is a token, as nats-server reads it). */
function credentialsOf(url: URL): NatsCredentials | undefined {
  const user = decodeURIComponent(url.username);
  const pass = decodeURIComponent(url.password);
  if (user && pass) return { user, pass };
  if (user) return { token: user };
  return pass ? { pass } : undefined;
}

function sameCredentials(a: NatsCredentials, b: NatsCredentials): boolean {
  return a.user === b.user && a.pass === b.pass && a.token === b.token;
}
