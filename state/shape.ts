/**
 * Shape checks of stored records. Values in a shared bucket come from other processes, older
 * versions and hand edits, so a mirror checks that each has the fields its readers use before
 * it lets them see it.
 */

type Kind = 'string' | 'number' | 'boolean' | 'object' | 'array';
/** A field's kind; a trailing '?' lets the field be absent (or null). */
export type FieldKind = Kind | `${Kind}?`;

/** A validator of plain records whose listed fields have the listed kinds (other fields are free). */
export function recordOf<T>(fields: Record<string, FieldKind>): (value: unknown) => value is T {
  const checks = Object.entries(fields).map(([name, kind]) => {
    const optional = kind.endsWith('?');
    return { name, kind: (optional ? kind.slice(0, -1) : kind) as Kind, optional };
  });
  return (value: unknown): value is T => {
    if (!isObject(value)) return false;
    const record = value as Record<string, unknown>;
    return checks.every(({ name, kind, optional }) => {
      const field = record[name];
      if (field === undefined || field === null) return optional;
      return hasKind(field, kind);
    });
  };
}

function hasKind(value: unknown, kind: Kind): boolean {
  if (kind === 'array') return Array.isArray(value);
  if (kind === 'object') return isObject(value);
  return typeof value === kind;
}

function isObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
