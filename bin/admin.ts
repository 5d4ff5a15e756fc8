/**
 * Admin operations behind the CLI. When `sluice serve` owns the data dir, the CLI reaches them
 * through its control socket (RemoteAdmin); otherwise it opens the data dir itself (LocalAdmin).
 * Either way the same code runs: chDB binds one data dir per process, so there is exactly one
 * owner at a time. Arguments are plain JSON values (they cross the socket).
 */
import type { AccountStore } from '../accounts/store.ts';
import type { AgentConfigs } from '../gateway/agent-configs.ts';
import type { RelayAdmin } from '../relay/admin/index.ts';
import { runOperatorCommand, type OperatorInput } from '../relay/operator.ts';
import type { RelayStore } from '../relay/store.ts';
import type { InstallTokens } from '../gateway/install-tokens.ts';
import { NotFoundError, type SourceRegistry } from '../gateway/sources.ts';
import { migrate } from '../storage/migrate.ts';
import type { SchemaOptions } from '../storage/schema.ts';
import { assertReadOnlySql, queryRows, quoteIdentifier, quoteString, type Storage } from '../storage/storage.ts';

export interface DeployFilter {
  sourceId?: string;
  service?: string;
  environment?: string;
  /** Epoch nanoseconds, as decimal strings (JSON has no bigint). */
  sinceNanos: string;
  untilNanos: string;
  limit: number;
}

export interface Admin {
  /** `tenantId`: the owner (default: the default tenant). */
  createSource(name: string, tenantId?: string | null): Promise<unknown>;
  listSources(tenantId?: string | null): Promise<unknown>;
  addKey(sourceId: string): Promise<unknown>;
  revokeKey(keyIdOrApiKey: string): Promise<unknown>;
  /** Read-only SQL; returns JSONEachRow text. */
  query(sql: string): Promise<string>;
  migrate(): Promise<unknown>;
  setAgentConfig(sourceId: string, config: unknown): Promise<unknown>;
  getAgentConfig(sourceId: string): Promise<unknown>;
  createInstallToken(sourceId: string): Promise<unknown>;
  listDeploys(filter: DeployFilter): Promise<unknown[]>;
  /** The latest heartbeat of each agent, newest first. */
  listAgents(sourceId?: string): Promise<unknown[]>;
  /** A `sluice relay ...` command (relay/operator.ts). */
  relay(command: string, input: OperatorInput): Promise<unknown>;
}

export const ADMIN_METHODS = [
  'createSource', 'listSources', 'addKey', 'revokeKey', 'query', 'migrate',
  'setAgentConfig', 'getAgentConfig', 'createInstallToken', 'listDeploys', 'listAgents', 'relay',
] as const;

export interface LocalAdminParts {
  sources: SourceRegistry;
  configs: AgentConfigs;
  installTokens: InstallTokens;
  /** Opens storage on first use: most commands do not need the engine. */
  storage: () => Promise<Storage>;
  database: string;
  schema: SchemaOptions;
  /** Base URL of the ingest HTTP port, for install URLs. */
  publicUrl: string;
  /** Tenants and users, opened on first use. */
  accounts: () => Promise<AccountStore>;
  /** The relay's admin operations and store, opened on first use. */
  relay: () => Promise<{ admin: RelayAdmin; store: RelayStore }>;
}

export class LocalAdmin implements Admin {
  constructor(private readonly parts: LocalAdminParts) {}

  // Arguments cross the control socket as JSON: an absent tenant arrives as null.
  async createSource(name: string, tenantId?: string | null) {
    if (typeof name !== 'string' || !name.trim()) throw new Error('a source needs a name');
    const accounts = await this.parts.accounts();
    const tenant = tenantId == null ? await accounts.defaultTenant() : accounts.tenants.get(String(tenantId));
    if (!tenant) throw new NotFoundError(`no tenant ${tenantId}`);
    return this.parts.sources.createSource(name.trim(), tenant.id);
  }

  listSources(tenantId?: string | null) {
    return this.parts.sources.listSources(tenantId == null ? undefined : String(tenantId));
  }

  addKey(sourceId: string) {
    return this.parts.sources.addKey(String(sourceId));
  }

  revokeKey(keyIdOrApiKey: string) {
    return this.parts.sources.revokeKey(String(keyIdOrApiKey));
  }

  async query(sql: string): Promise<string> {
    assertReadOnlySql(sql);
    return (await this.parts.storage()).query(sql, 'JSONEachRow');
  }

  async migrate() {
    return migrate(await this.parts.storage(), this.parts.database, this.parts.schema);
  }

  async setAgentConfig(sourceId: string, config: unknown) {
    await this.requireSource(sourceId);
    return this.parts.configs.set(sourceId, config);
  }

  async getAgentConfig(sourceId: string) {
    await this.requireSource(sourceId);
    return (await this.parts.configs.get(sourceId)) ?? { sourceId, version: 0, updatedAt: null, config: {} };
  }

  async createInstallToken(sourceId: string) {
    const issued = await this.parts.installTokens.create(String(sourceId));
    return { ...issued, url: `${this.parts.publicUrl}/install/${issued.token}` };
  }

  async listDeploys(filter: DeployFilter): Promise<unknown[]> {
    const conditions = [
      `Timestamp >= fromUnixTimestamp64Nano(toInt64(${nanosLiteral(filter.sinceNanos)}))`,
      `Timestamp < fromUnixTimestamp64Nano(toInt64(${nanosLiteral(filter.untilNanos)}))`,
    ];
    if (filter.sourceId) conditions.push(`SourceId = ${quoteString(filter.sourceId)}`);
    if (filter.service) conditions.push(`Service = ${quoteString(filter.service)}`);
    if (filter.environment) conditions.push(`Environment = ${quoteString(filter.environment)}`);
    const limit = Number.isSafeInteger(filter.limit) && filter.limit > 0 ? filter.limit : 100;
    return this.rows(
      `SELECT toString(toUnixTimestamp64Nano(Timestamp)) AS ns_timestamp, SourceId AS sourceId, Service AS service, Version AS version,
              Environment AS environment, Commit AS commit, DeployedBy AS deployedBy, Description AS description,
              Url AS url, Attributes AS attributes
       FROM ${this.table('deploy_markers')} WHERE ${conditions.join(' AND ')}
       ORDER BY Timestamp DESC LIMIT ${limit}`,
    );
  }

  async listAgents(sourceId?: string): Promise<unknown[]> {
    const where = sourceId ? `WHERE SourceId = ${quoteString(sourceId)}` : '';
    return this.rows(
      `SELECT SourceId AS sourceId, AgentId AS agentId, toString(toUnixTimestamp64Nano(max(LastSeen))) AS ns_lastSeen,
              argMax(Host, LastSeen) AS host, argMax(Version, LastSeen) AS version, argMax(Os, LastSeen) AS os,
              argMax(Arch, LastSeen) AS arch, argMax(Status, LastSeen) AS status,
              toString(toUnixTimestamp64Nano(argMax(StartedAt, LastSeen))) AS ns_startedAt, argMax(Attributes, LastSeen) AS attributes
       FROM ${this.table('agent_heartbeats')} ${where}
       GROUP BY SourceId, AgentId ORDER BY max(LastSeen) DESC`,
    );
  }

  async relay(command: string, input: OperatorInput): Promise<unknown> {
    const { admin, store } = await this.parts.relay();
    return runOperatorCommand(admin, store, String(command), input ?? {});
  }

  private async requireSource(sourceId: string): Promise<void> {
    if (typeof sourceId !== 'string' || !(await this.parts.sources.getSource(sourceId))) throw new NotFoundError(`no source ${sourceId}`);
  }

  private table(name: string): string {
    return `${quoteIdentifier(this.parts.database)}.${quoteIdentifier(name)}`;
  }

  /**
   * JSONEachRow rows; a column `ns_<name>` (epoch nanoseconds as a string: JSON numbers would
   * round them) becomes `<name>` as an RFC 3339 time, or null.
   */
  private async rows(sql: string): Promise<unknown[]> {
    const rows = await queryRows<Record<string, unknown>>(await this.parts.storage(), sql);
    return rows.map((row) =>
      Object.fromEntries(
        Object.entries(row).map(([key, value]) =>
          key.startsWith('ns_') ? [key.slice(3), value === null ? null : nanosToIso(BigInt(value as string))] : [key, value],
        ),
      ),
    );
  }
}

function nanosLiteral(value: string): string {
  if (!/^\d{1,19}$/.test(String(value))) throw new Error(`not epoch nanoseconds: ${value}`);
  return String(value);
}

/** RFC 3339 with all nine fractional digits. */
export function nanosToIso(nanos: bigint): string {
  const iso = new Date(Number(nanos / 1_000_000n)).toISOString();
  return `${iso.slice(0, 19)}.${String(nanos % 1_000_000_000n).padStart(9, '0')}Z`;
}
