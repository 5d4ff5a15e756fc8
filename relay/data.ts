/**
 * The `data` object of submissions and notifications (relay spec, section 2): free-form, within
 * limits that keep a stored submission and the messages rendered from it bounded. A breach is
 * 400 `Validation failed` naming the field (`data.meta.note`). Lengths are in characters
 * (Unicode code points), as the spec counts them, not UTF-16 units.
 */
import { validationFailed } from './errors.ts';

export const DATA_LIMITS = {
  /** Fields per object. */
  fields: 100,
  /** `data` is level 1, `data.meta` level 2: an object or array below that is refused. */
  depth: 2,
  nameLength: 128,
  stringLength: 10_000,
  arrayItems: 100,
} as const;

/** Keys the templates use for themselves: a submission may not set them. */
export const RESERVED_DATA_KEYS: readonly string[] = ['_subject', '_body', '_footer'];
const RESERVED = new Set(RESERVED_DATA_KEYS);
/** With the u flag, a surrogate matches only when it is not half of a pair. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/** Characters (code points) in `text`. */
export function characters(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

/** Whether `text` is at most `limit` characters. */
export function withinCharacters(text: string, limit: number): boolean {
  // n UTF-16 units hold at most n code points: count only when the units exceed the limit.
  return text.length <= limit || characters(text) <= limit;
}

/** Throws 400 `Validation failed` at the first breach of the limits; `field` names the object. */
export function checkData(data: unknown, field = 'data'): void {
  if (!isPlainObject(data)) throw validationFailed(field, 'must be an object');
  walk(data, field, 1);
}

function walk(value: unknown, path: string, level: number): void {
  if (value === null || typeof value === 'boolean') return;
  if (typeof value === 'number') {
    // JSON.parse turns 1e400 into Infinity: not a number anyone sent on purpose.
    if (!Number.isFinite(value)) throw validationFailed(path, 'must be a finite number');
    return;
  }
  if (typeof value === 'string') {
    if (!withinCharacters(value, DATA_LIMITS.stringLength)) throw validationFailed(path, `must be at most ${DATA_LIMITS.stringLength} characters`);
    // A lone surrogate (`"\ud800"`) would be stored as U+FFFD, changing what was sent.
    if (LONE_SURROGATE.test(value)) throw validationFailed(path, 'must be valid Unicode text (it holds a lone surrogate)');
    return;
  }
  if (Array.isArray(value)) {
    if (level > DATA_LIMITS.depth) throw validationFailed(path, `is nested deeper than ${DATA_LIMITS.depth} levels`);
    if (value.length > DATA_LIMITS.arrayItems) throw validationFailed(path, `must have at most ${DATA_LIMITS.arrayItems} items`);
    value.forEach((item, index) => walk(item, `${path}[${index}]`, level + 1));
    return;
  }
  if (isPlainObject(value)) {
    if (level > DATA_LIMITS.depth) throw validationFailed(path, `is nested deeper than ${DATA_LIMITS.depth} levels`);
    const keys = Object.keys(value);
    if (keys.length > DATA_LIMITS.fields) throw validationFailed(path, `must have at most ${DATA_LIMITS.fields} fields`);
    for (const key of keys) {
      const child = childPath(path, key);
      if (key === '') throw validationFailed(child, 'is an empty field name');
      if (!withinCharacters(key, DATA_LIMITS.nameLength)) throw validationFailed(childPath(path, `${key.slice(0, 40)}…`), `field name must be at most ${DATA_LIMITS.nameLength} characters`);
      if (LONE_SURROGATE.test(key)) throw validationFailed(child, 'field name must be valid Unicode text');
      if (RESERVED.has(key)) throw validationFailed(child, `is a reserved name (${RESERVED_DATA_KEYS.join(', ')} may not be used in data)`);
      walk(value[key], child, level + 1);
    }
    return;
  }
  throw validationFailed(path, 'must be a string, number, boolean, null, object or array');
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `data.name`, or `data["a name"]` when the key is not an identifier. */
function childPath(path: string, key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}
