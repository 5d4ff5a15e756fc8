/** Structured logs: pino, one JSON line per event. Never log API keys or payloads. */
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, destination: 'stdout' | 'stderr' = 'stdout'): Logger {
  return pino(
    {
      level,
      base: { service: 'sluice' },
      // Keys can appear in headers; redact them wherever a request object is logged.
      redact: ['headers["x-api-key"]', 'headers.authorization', 'apiKey', 'key'],
    },
    pino.destination({ fd: destination === 'stdout' ? 1 : 2, sync: false }),
  );
}
