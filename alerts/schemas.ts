/**
 * The bodies the alert API takes, as JSON Schemas checked with ajv (as console/schemas.ts does):
 * unknown fields refused, strings and lists bounded, defaults filled in. A refused body is an
 * ApiError 400 naming the first problem's field.
 */
import { Ajv } from 'ajv';
import { ApiError } from '../core/errors.ts';
import { firstProblem, lazyValidators } from '../core/validation.ts';

const object = (properties: Record<string, unknown>, required: string[]) => ({ type: 'object', properties, required, additionalProperties: false });
const text = (maxLength: number, minLength = 0) => ({ type: 'string', minLength, maxLength });
const texts = (maxItems: number, item: object = text(1024, 1)) => ({ type: 'array', maxItems, items: item });
const seconds = (minimum: number, maximum: number) => ({ type: 'integer', minimum, maximum });

/** Label names as Prometheus writes them, so rules and silences read the same everywhere. */
export const labels = {
  type: 'object',
  maxProperties: 20,
  propertyNames: { pattern: '^[a-zA-Z_][a-zA-Z0-9_]*$', maxLength: 64 },
  additionalProperties: text(256),
};

/** One branch per condition kind, chosen by `kind`, so a problem is reported in the branch meant. */
const condition = {
  type: 'object',
  properties: { kind: { type: 'string' } },
  required: ['kind'],
  discriminator: { propertyName: 'kind' },
  oneOf: [
    object({
      kind: { const: 'metric' },
      query: object({
        name: text(1024, 1),
        kind: { enum: ['gauge', 'sum', 'histogram', 'exp_histogram', 'summary', 'agent'] },
        aggregation: { enum: ['avg', 'sum', 'min', 'max', 'rate', 'p50', 'p95', 'p99', 'count'] },
        services: texts(50),
        attributes: texts(20, object({ key: text(1024, 1), value: text(4096) }, ['key', 'value'])),
      }, ['name', 'kind', 'aggregation']),
    }, ['kind', 'query']),
    object({
      kind: { const: 'log_count' }, text: text(1024), services: texts(50), minSeverity: { type: 'integer', minimum: 1, maximum: 24 },
      attributes: texts(20, object({ key: text(1024, 1), value: text(4096) }, ['key', 'value'])),
    }, ['kind']),
    object({ kind: { const: 'error_rate' }, service: text(1024, 1) }, ['kind', 'service']),
    object({ kind: { const: 'latency' }, service: text(1024, 1), percentile: { enum: [50, 95, 99] } }, ['kind', 'service', 'percentile']),
    object({ kind: { const: 'deploy_regression' }, service: text(1024, 1) }, ['kind']),
  ],
};

export const ALERT_SCHEMAS = {
  Rule: object({
    name: { type: 'string', minLength: 1, maxLength: 200, pattern: '\\S' },
    condition,
    comparator: { enum: ['above', 'below'] },
    threshold: { type: 'number' },
    windowSeconds: seconds(60, 86_400),
    forSeconds: { ...seconds(0, 86_400), default: 0 },
    noData: { enum: ['ok', 'firing', 'keep'], default: 'ok' },
    labels: { ...labels, default: {} },
    notify: object({ siteId: text(100, 1), formId: text(100, 1) }, ['siteId', 'formId']),
    // 0 or 300..604800; the gap is checked in rules.ts, where the message can say so.
    repeatSeconds: { ...seconds(0, 604_800), default: 0 },
    enabled: { type: 'boolean', default: true },
  }, ['name', 'condition', 'comparator', 'threshold', 'windowSeconds']),
  Silence: object({
    ruleId: { type: 'string', pattern: '^alr_[0-9a-f]{16}$' },
    labels,
    endsAt: { type: 'integer', minimum: 0 },
    comment: { type: 'string', minLength: 1, maxLength: 1000, pattern: '\\S' },
  }, ['endsAt', 'comment']),
} as const;

const validator = lazyValidators(ALERT_SCHEMAS, () => new Ajv({ allErrors: false, strict: true, discriminator: true, useDefaults: true }));

/** The body as `T` (a copy, defaults filled in), or ApiError 400 naming the field. */
export function validAlertBody<T>(schema: keyof typeof ALERT_SCHEMAS, body: unknown): T {
  // A copy: ajv fills defaults in place, and the caller's body stays as it was sent.
  const value = structuredClone(body ?? {});
  const validate = validator(schema);
  if (!validate(value)) {
    const error = validate.errors![0]!;
    // An unknown condition kind: name the tag and the kinds there are, not ajv's "oneOf" wording.
    const problem = error.keyword === 'discriminator'
      ? { field: `${error.instancePath.slice(1)}.kind`, message: 'must be one of metric, log_count, error_rate, latency, deploy_regression' }
      : firstProblem(validate.errors!);
    throw invalid(problem.field, problem.message);
  }
  return value as T;
}

/** The 400 of a field that breaks a rule the schema cannot say. */
export function invalid(field: string, message: string): ApiError {
  return new ApiError(400, `Validation failed: ${field} ${message}`, { field });
}
