/**
 * The request-body schemas compile on first use (core/validation.ts lazyValidators), so a schema
 * ajv's strict mode refuses would only show on its route's first request, as a 500. Every one is
 * used here once: an empty body gets the route's 400, never a compile error.
 */
import { describe, expect, it } from 'vitest';
import { ALERT_SCHEMAS, validAlertBody } from '../alerts/schemas.ts';
import { CONSOLE_SCHEMAS, validBody } from '../console/schemas.ts';
import { ADMIN_SCHEMAS, createBodyValidator, PUBLIC_SCHEMAS, type AdminSchemaName } from '../relay/schemas.ts';

/** What validating `{}` did: 'ok', or the status of the error it threw (a compile error has none). */
function outcome(validate: () => unknown): string {
  try {
    validate();
    return 'ok';
  } catch (err) {
    const status = (err as { statusCode?: number }).statusCode;
    return status === undefined ? `${(err as Error).message}` : String(status);
  }
}

describe('request-body schemas', () => {
  it('each compiles on its first use and answers an empty body with ok or 400', () => {
    const outcomes = [
      ...Object.keys(ALERT_SCHEMAS).map((name) => outcome(() => validAlertBody(name as keyof typeof ALERT_SCHEMAS, {}))),
      ...Object.keys(CONSOLE_SCHEMAS).map((name) => outcome(() => validBody(name as keyof typeof CONSOLE_SCHEMAS, {}))),
      ...Object.keys({ ...ADMIN_SCHEMAS, ...PUBLIC_SCHEMAS }).map((name) => outcome(() => createBodyValidator()(name as AdminSchemaName, {}))),
    ];
    expect(outcomes.length).toBeGreaterThan(30);
    expect(outcomes.filter((result) => result !== 'ok' && result !== '400')).toEqual([]);
  });
});
