/**
 * Service URLs without their secrets, for log lines and error messages. CLICKHOUSE_URL,
 * NATS_URL and REDIS_URL may carry a password (user:password@), a token where the user name
 * would be (nats://token@host) or a password in the query (?password=): none of it may reach a
 * log or an error. Every place that names such a URL goes through here.
 */

/** Schemes whose user part alone may be a secret: NATS takes `nats://<token>@host`. */
const TOKEN_SCHEMES = new Set(['nats:', 'tls:', 'ws:', 'wss:']);

/** Shown where a token stood, so a reader still sees that credentials were given. */
const HIDDEN = '***';

/**
 * The URL as `scheme://user@host:port/path`: no password, no query, no fragment; a user part
 * that is a NATS token is shown as `***`. A string that does not parse is not echoed at all
 * (a malformed URL may still contain the password).
 */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return '(not a valid URL)';
  }
  let user = '';
  if (parsed.username && (parsed.password || !TOKEN_SCHEMES.has(parsed.protocol))) user = `${parsed.username}@`;
  else if (parsed.username || parsed.password) user = `${HIDDEN}@`;
  const path = parsed.pathname === '/' ? '' : parsed.pathname;
  return `${parsed.protocol}//${user}${parsed.host}${path}`;
}
