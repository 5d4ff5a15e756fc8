/**
 * Configurations pushed to agents, one per source, in the state store. Every gateway keeps
 * each source's rendered answer (body and ETag) in memory, kept fresh by the store's watch, so
 * a fleet polling GET /api/v1/agent/config with If-None-Match costs a map lookup and a 304.
 */
import { createHash } from 'node:crypto';
import { SluiceError } from '../core/errors.ts';
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { MAX_AGENT_CONFIG_BYTES } from '../pipeline/agent/schemas.ts';
import { StateMirror } from '../state/mirror.ts';
import { recordOf } from '../state/shape.ts';
import type { StateStore } from '../state/store.ts';

export interface AgentConfigRecord {
  sourceId: string;
  /** 1 for the first config set, +1 on each change; 0 when none was ever set. */
  version: number;
  updatedAt: string | null;
  config: Record<string, unknown>;
}

/** The response of GET /api/v1/agent/config for one source. */
export interface RenderedAgentConfig {
  body: string;
  /** A strong ETag of the body, quoted. */
  etag: string;
}

const AGENT_CONFIGS = 'agent_configs';

const isAgentConfigRecord = recordOf<AgentConfigRecord>({ sourceId: 'string', version: 'number', updatedAt: 'string?', config: 'object' });

export class AgentConfigs {
  private readonly rendered = new Map<string, RenderedAgentConfig>();
  private readonly records: StateMirror<AgentConfigRecord>;

  constructor(private readonly store: StateStore, log?: Logger) {
    this.records = new StateMirror(store, AGENT_CONFIGS, { validate: isAgentConfigRecord, log });
    this.records.onChange((sourceId, record) => this.index(sourceId, record));
  }

  async start(): Promise<void> {
    await this.records.start();
  }

  async shutdown(): Promise<void> {
    this.records.stop();
  }

  /** The rendered configs' health, for readiness (`state.agent_configs`). */
  status(): ComponentStatus {
    return this.records.status();
  }

  /** What the agents of `sourceId` get: its config, or an empty one at version 0. */
  current(sourceId: string): RenderedAgentConfig {
    return this.rendered.get(sourceId) ?? render({ sourceId, version: 0, updatedAt: null, config: {} });
  }

  async get(sourceId: string): Promise<AgentConfigRecord | undefined> {
    const record = await this.store.get<unknown>(AGENT_CONFIGS, sourceId);
    return isAgentConfigRecord(record) ? record : undefined;
  }

  /** Replaces a source's config (the caller checked the source exists). */
  async set(sourceId: string, config: unknown): Promise<AgentConfigRecord> {
    if (typeof config !== 'object' || config === null || Array.isArray(config)) {
      throw new SluiceError('bad_request', 'an agent config must be a JSON object');
    }
    const bytes = Buffer.byteLength(JSON.stringify(config));
    if (bytes > MAX_AGENT_CONFIG_BYTES) {
      throw new SluiceError('bad_request', `agent config is ${bytes} bytes; the limit is ${MAX_AGENT_CONFIG_BYTES}`);
    }
    const previous = await this.get(sourceId);
    const record: AgentConfigRecord = {
      sourceId,
      version: (previous?.version ?? 0) + 1,
      updatedAt: new Date().toISOString(),
      config: config as Record<string, unknown>,
    };
    await this.records.set(sourceId, record);
    return record;
  }

  private index(sourceId: string, record: AgentConfigRecord | undefined): void {
    if (record) this.rendered.set(sourceId, render(record));
    else this.rendered.delete(sourceId);
  }
}

function render(record: AgentConfigRecord): RenderedAgentConfig {
  const body = JSON.stringify(record);
  return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

/** Whether an If-None-Match header matches `etag` (weak comparison, as RFC 9110 asks for GET). */
export function etagMatches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(',').some((candidate) => {
    const tag = candidate.trim();
    return tag === '*' || tag.replace(/^W\//, '') === etag;
  });
}
