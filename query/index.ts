/** The read-only ClickHouse HTTP endpoint of the embedded default (SLUICE_QUERY_PORT), for Grafana. */
import type { Logger } from '../core/log.ts';
import type { ClientIpResolver, ClientLimiter } from '../gateway/client-ip.ts';
import type { HttpHandler } from '../gateway/http/adapter.ts';
import type { StatementRunner } from '../storage/chdb-reader.ts';
import { FailedAuthThrottle, PasswordCheck } from './auth.ts';
import { queryGate } from './gate.ts';
import { queryHttpHandler } from './http.ts';
import { QueryScope } from './scope.ts';
import type { QueryLimits } from './request.ts';

export { MAX_QUERY_BODY_BYTES } from './http.ts';
export type { QueryLimits } from './request.ts';

/** Failed authentications a client address may make in a minute (and at once) before it is held off. */
export const FAILED_AUTH_PER_MINUTE = 10;

export interface QueryEndpointParts {
  runner: StatementRunner;
  user: string;
  password: string;
  /** The telemetry database: the current database of every request, the one whose telemetry tables it shows. */
  database: string;
  limits: QueryLimits;
  maxConcurrent: number;
  /** Failed authentications per client address (FAILED_AUTH_PER_MINUTE), keyed by its network. */
  failedAuthLimiter: ClientLimiter;
  clientIp: ClientIpResolver;
  onAnswer(status: string): void;
  log: Logger;
}

/** The endpoint's handler, once the engine said which time zone and name it answers with. */
export async function openQueryEndpoint(parts: QueryEndpointParts): Promise<HttpHandler> {
  const info = await parts.runner.run(parts.database, 'SELECT timezone(), displayName()', { format: 'JSONCompactEachRow' });
  const [timezone, displayName] = JSON.parse(Buffer.from(info.bytes).toString('utf8')) as [string, string];
  return queryHttpHandler({
    runner: parts.runner,
    password: new PasswordCheck(parts.user, parts.password),
    throttle: new FailedAuthThrottle(parts.failedAuthLimiter),
    clientIp: parts.clientIp,
    gate: queryGate(parts.maxConcurrent),
    scope: new QueryScope(parts.database),
    limits: parts.limits,
    server: { timezone, displayName },
    onAnswer: parts.onAnswer,
    log: parts.log,
  });
}
