/** Structured logs: pino, one JSON line per event. Never log API keys or payloads. */
import { pino, type Logger } from 'pino';

export type { Logger };

/** Keys, passwords and provider secrets: redacted wherever an object carrying them is logged. */
const REDACT = [
  'headers["x-api-key"]', 'headers.authorization', 'headers["x-operator-token"]', 'headers["x-clickhouse-key"]', 'apiKey', 'key',
  'password', 'currentPassword', 'newPassword', 'secret', '*.password', '*.secret', '*.apiKey',
];

/** A logger to stdout or stderr, or to any stream (tests read what was logged). */
export function createLogger(level: string, destination: 'stdout' | 'stderr' | pino.DestinationStream = 'stdout'): Logger {
  const stream = typeof destination === 'string' ? pino.destination({ fd: destination === 'stdout' ? 1 : 2, sync: false }) : destination;
  return pino({ level, base: { service: 'sluice' }, redact: REDACT }, stream);
}

let fallback: Logger | undefined;

/**
 * The logger of a component built without one (the CLI, a test): its warnings still reach
 * stderr rather than nowhere. The composition root passes its own logger instead.
 */
export function fallbackLogger(): Logger {
  return (fallback ??= createLogger('warn', 'stderr'));
}
