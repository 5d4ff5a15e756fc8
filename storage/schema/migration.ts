/** What one migration is: its version, its statements for the options, and what proves it done. */
import type { SchemaOptions } from './ddl.ts';

export interface Migration {
  version: number;
  name: string;
  /**
   * The statements, in order, for the database `db` (an unquoted name), shaped by `options`.
   * `tables` are the database's tables as they are before the migration runs (name → engine),
   * for a migration that converts what exists: it emits only what is left to do, so one that
   * was interrupted finishes when it runs again.
   */
  statements(db: string, options: SchemaOptions, tables: ReadonlyMap<string, string>): string[];
  /** What is still wrong after the statements ran (`tables` read again), or undefined: the migration is recorded only then. */
  verify?(tables: ReadonlyMap<string, string>, options: SchemaOptions): string | undefined;
}
