/**
 * Admin operations behind the CLI. When `sluice serve` owns the data dir, the CLI reaches them
 * through its control socket (RemoteAdmin); otherwise it opens the data dir itself (LocalAdmin).
 * Either way the same code runs: chDB binds one data dir per process, so there is exactly one
 * owner at a time.
 */
import type { SourceRegistry } from '../gateway/sources.ts';
import { migrate } from '../storage/migrate.ts';
import type { SchemaOptions } from '../storage/schema.ts';
import { assertReadOnlySql, type Storage } from '../storage/storage.ts';

export interface Admin {
  createSource(name: string): Promise<unknown>;
  listSources(): Promise<unknown>;
  addKey(sourceId: string): Promise<unknown>;
  revokeKey(keyIdOrApiKey: string): Promise<unknown>;
  /** Read-only SQL; returns JSONEachRow text. */
  query(sql: string): Promise<string>;
  migrate(): Promise<unknown>;
}

export const ADMIN_METHODS = ['createSource', 'listSources', 'addKey', 'revokeKey', 'query', 'migrate'] as const;

export class LocalAdmin implements Admin {
  constructor(
    private readonly sources: SourceRegistry,
    /** Opens storage on first use: most commands do not need the engine. */
    private readonly storage: () => Promise<Storage>,
    private readonly database: string,
    private readonly schema: SchemaOptions = {},
  ) {}

  createSource(name: string) {
    if (!name.trim()) throw new Error('a source needs a name');
    return this.sources.createSource(name.trim());
  }

  listSources() {
    return this.sources.listSources();
  }

  addKey(sourceId: string) {
    return this.sources.addKey(sourceId);
  }

  revokeKey(keyIdOrApiKey: string) {
    return this.sources.revokeKey(keyIdOrApiKey);
  }

  async query(sql: string): Promise<string> {
    assertReadOnlySql(sql);
    return (await this.storage()).query(sql, 'JSONEachRow');
  }

  async migrate() {
    return migrate(await this.storage(), this.database, this.schema);
  }
}
