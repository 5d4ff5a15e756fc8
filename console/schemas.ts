/**
 * The bodies the console API takes, as JSON Schemas checked with ajv: unknown fields refused,
 * strings and lists bounded. A refused body answers 400 naming the first problem.
 */
import { Ajv } from 'ajv';
import { firstProblem, lazyValidators } from '../core/validation.ts';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../accounts/passwords.ts';
import { ApiError } from '../core/errors.ts';
import { isEmailAddress } from '../core/email-address.ts';

const object = (properties: Record<string, unknown>, required: string[]) => ({ type: 'object', properties, required, additionalProperties: false });
const text = (maxLength: number, minLength = 0) => ({ type: 'string', minLength, maxLength });
const password = text(PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH);
const email = { type: 'string', maxLength: 254, format: 'email-address' };
const name = { type: 'string', minLength: 1, maxLength: 200, pattern: '\\S' };

/** A saved chart: the metric query without its time range (the dashboard's applies). */
const chart = object({
  title: text(200),
  query: object({
    name: text(1024, 1),
    kind: { enum: ['gauge', 'sum', 'histogram', 'exp_histogram', 'summary', 'agent'] },
    aggregation: { enum: ['avg', 'sum', 'min', 'max', 'rate', 'p50', 'p95', 'p99', 'count'] },
    services: { type: 'array', maxItems: 50, items: text(1024) },
    groupBy: text(1024),
    attributes: { type: 'array', maxItems: 20, items: object({ key: text(1024, 1), value: text(4096) }, ['key', 'value']) },
    stepSeconds: { type: 'integer', minimum: 1, maximum: 86_400 },
  }, ['name', 'kind', 'aggregation']),
  width: { enum: ['half', 'full'] },
}, ['title', 'query']);

export const CONSOLE_SCHEMAS = {
  FirstRun: object({ token: text(200, 1), name, email, password }, ['token', 'name', 'email', 'password']),
  SignIn: object({ email: text(254), password: text(PASSWORD_MAX_LENGTH), tenantId: text(64, 1) }, ['email', 'password']),
  CreateSource: object({ name }, ['name']),
  AddKey: object({ revokeKeyId: text(100, 1) }, []),
  Dashboard: object({ name, charts: { type: 'array', maxItems: 24, items: chart } }, ['name', 'charts']),
  Invite: object({ email, role: { enum: ['owner', 'admin', 'member'] } }, ['email', 'role']),
  AcceptInvitation: object({ token: text(200, 1), name, password }, ['token', 'name', 'password']),
  InvitationToken: object({ token: text(200, 1) }, ['token']),
  ChangeUser: object({ role: { enum: ['owner', 'admin', 'member'] }, active: { type: 'boolean' } }, []),
  ChangePassword: object({ currentPassword: text(PASSWORD_MAX_LENGTH), newPassword: password }, ['currentPassword', 'newPassword']),
} as const;

export type ConsoleSchemaName = keyof typeof CONSOLE_SCHEMAS;

const validator = lazyValidators(CONSOLE_SCHEMAS, () => new Ajv({ allErrors: false, strict: true }).addFormat('email-address', { type: 'string', validate: isEmailAddress }));

/** The body as `T`, or 400 naming the problem. An absent body counts as `{}`. */
export function validBody<T>(schema: ConsoleSchemaName, body: unknown): T {
  const value = body ?? {};
  const validate = validator(schema);
  if (!validate(value)) {
    const problem = firstProblem(validate.errors ?? [], { format: 'must be one email address' });
    throw new ApiError(400, `Validation failed: ${problem.field} ${problem.message}`, { field: problem.field });
  }
  return value as T;
}
