/**
 * ajv errors as one clear sentence about one field: the first problem, its path written the
 * way a JSON author reads it (`entries[42].timestamp`, `origins[1]`), the body itself `body`.
 */
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';

/**
 * Each schema's validator, compiled on its first use: compiling a module's schemas when it is
 * imported cost every process 80–140 ms per module at start, most of it for routes it never serves.
 */
export function lazyValidators<K extends string>(schemas: Readonly<Record<K, object>>, makeAjv: () => Ajv): (name: K) => ValidateFunction {
  let ajv: Ajv | undefined;
  const compiled = new Map<K, ValidateFunction>();
  return (name) => {
    let validate = compiled.get(name);
    if (!validate) compiled.set(name, (validate = (ajv ??= makeAjv()).compile(schemas[name])));
    return validate;
  };
}

export interface Problem {
  field: string;
  message: string;
}

/** `/entries/42/timestamp` → `entries[42].timestamp`. */
export function fieldPath(instancePath: string, child?: string): string {
  const parts = instancePath.split('/').slice(1).map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'));
  if (child !== undefined) parts.push(child);
  let path = '';
  for (const part of parts) path += /^\d+$/.test(part) ? `[${part}]` : path ? `.${part}` : part;
  return path || 'body';
}

/**
 * The first of ajv's errors (run it with allErrors off). `messages` overrides the text per
 * keyword (e.g. one message for every refusal of a custom format).
 */
export function firstProblem(errors: ErrorObject[], messages: Partial<Record<string, string>> = {}): Problem {
  const error = errors[0]!;
  const override = messages[error.keyword];
  // propertyNames: the key itself is wrong (shown shortened: it may be long).
  if (error.propertyName !== undefined) {
    const name = error.propertyName.length > 40 ? `${error.propertyName.slice(0, 40)}…` : error.propertyName;
    return { field: `${fieldPath(error.instancePath)}["${name}"]`, message: `key ${error.message ?? 'is invalid'}` };
  }
  switch (error.keyword) {
    case 'required':
      return { field: fieldPath(error.instancePath, error.params.missingProperty), message: override ?? 'is required' };
    case 'additionalProperties':
      return {
        field: fieldPath(error.instancePath, error.params.additionalProperty),
        message: override ?? 'is not a known field',
      };
    case 'enum':
      return { field: fieldPath(error.instancePath), message: override ?? `must be one of ${(error.params.allowedValues as unknown[]).join(', ')}` };
    case 'pattern':
      return { field: fieldPath(error.instancePath), message: override ?? `must match ${error.params.pattern}` };
    default:
      return { field: fieldPath(error.instancePath), message: override ?? error.message ?? 'is invalid' };
  }
}
