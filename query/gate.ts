/** The query endpoint's cap on statements at once (core/concurrency-gate.ts), refused as ClickHouse refuses. */
import { ConcurrencyGate } from '../core/concurrency-gate.ts';
import { ClickHouseException } from './errors.ts';

export function queryGate(running: number, waiting = 100): ConcurrencyGate {
  return new ConcurrencyGate(running, waiting, () =>
    ClickHouseException.of('TOO_MANY_SIMULTANEOUS_QUERIES', `Too many simultaneous queries: ${running} running and ${waiting} waiting`, { status: 503, retryAfterSeconds: 1 }));
}
