/**
 * One bucket of records keyed by their id, mirrored in memory (state/mirror.ts): the shape the
 * account and relay stores keep their records in.
 */
import type { Logger } from '../core/log.ts';
import { StateMirror } from './mirror.ts';
import { recordOf, type FieldKind } from './shape.ts';
import type { StateStore } from './store.ts';

export class Collection<T extends { id: string }> extends StateMirror<T> {
  /** @param fields the fields the readers use from each record, checked on every value the store brings */
  constructor(store: StateStore, bucket: string, fields: Record<string, FieldKind>, log?: Logger) {
    const shaped = recordOf<T>({ id: 'string', ...fields });
    // A record stored under another id than its own would be found under the wrong one.
    super(store, bucket, { validate: (value, key): value is T => shaped(value) && value.id === key, log });
  }

  filter(predicate: (item: T) => boolean): T[] {
    return this.values().filter(predicate);
  }

  async put(item: T): Promise<T> {
    await this.set(item.id, item);
    return item;
  }
}
