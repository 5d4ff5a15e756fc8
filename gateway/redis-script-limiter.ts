/**
 * RedisScriptLimiter: what every cluster limiter shares. Each take runs one atomic Lua script
 * in Redis (on Redis's own clock, so gateways' clocks do not matter); a driver brings only its
 * script, the script's arguments and the in-process limiter it falls back to. If Redis is down
 * or slow, the gateway falls back to that local limiter instead of refusing all traffic, says
 * so once in the log and in `mode`, and tries Redis again every `retryIntervalMs`.
 */
import { createHash } from 'node:crypto';
import { withinDeadline } from '../core/deadline.ts';
import type { Logger } from '../core/log.ts';
import type { LimitDecision, Limiter } from './limiter.ts';

/** The two commands the limiter needs; a node-redis client has both. */
export interface RedisScripts {
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
}

/** An in-process limiter that decides at once: the fallback while Redis is unavailable. */
export interface LocalLimiter extends Limiter {
  take(key: string): LimitDecision;
}

export interface RedisScriptOptions {
  /** Prefix of the keys in Redis. Default: the driver's own ('sluice:rl:' token buckets, 'sluice:rlw:' windows). */
  keyPrefix?: string;
  /** A Redis answer slower than this counts as Redis being down. Default 100 ms. */
  commandTimeoutMs?: number;
  /** While falling back, how often to try Redis again. Default 2000 ms. */
  retryIntervalMs?: number;
  /** Closes the client at shutdown, when the limiter owns it. */
  closeClient?: () => Promise<void>;
}

/** A driver's Lua script: KEYS[1] is the client's key; it returns {allowed (0|1), retry-after seconds}. */
export interface LimiterScript {
  source: string;
  /** What the log calls the shared state ('buckets', 'windows'). */
  shared: string;
  /** Used when the options name no keyPrefix. */
  defaultKeyPrefix: string;
}

export abstract class RedisScriptLimiter implements Limiter {
  private readonly sha: string;
  private readonly keyPrefix: string;
  private readonly commandTimeoutMs: number;
  private readonly retryIntervalMs: number;
  private fallbackUntil = 0;
  private current: 'redis' | 'local-fallback' = 'redis';
  /** Decisions taken by the local limiter while Redis was unavailable (for /metrics). */
  fallbackDecisions = 0;

  protected constructor(
    private readonly redis: RedisScripts,
    private readonly script: LimiterScript,
    private readonly local: LocalLimiter,
    private readonly redisOptions: RedisScriptOptions,
    private readonly log: Logger,
  ) {
    this.sha = createHash('sha1').update(script.source).digest('hex');
    this.keyPrefix = redisOptions.keyPrefix ?? script.defaultKeyPrefix;
    this.commandTimeoutMs = redisOptions.commandTimeoutMs ?? 100;
    this.retryIntervalMs = redisOptions.retryIntervalMs ?? 2000;
  }

  /** ARGV of the script for one take. */
  protected abstract scriptArguments(): string[];

  /** Which limiter decides right now. */
  get mode(): 'redis' | 'local-fallback' {
    return this.current;
  }

  async take(key: string): Promise<LimitDecision> {
    return this.runOrFallBack(key, this.scriptArguments(), ([allowed, retry]) => ({ allowed: allowed === 1, retryAfterSeconds: retry }), () => this.local.take(key));
  }

  /**
   * Runs the script on `key` with `args` and reads its reply; while Redis is unavailable, asks
   * `fallback` (the local limiter) instead. A driver with more than `take` runs them through here.
   */
  protected async runOrFallBack<T>(key: string, args: string[], fromReply: (reply: [number, number]) => T, fallback: () => T): Promise<T> {
    if (this.current === 'local-fallback' && Date.now() < this.fallbackUntil) return this.fallback(fallback);
    try {
      const reply = (await this.withTimeout(this.runScript(key, args))) as [number, number];
      if (this.current === 'local-fallback') {
        this.current = 'redis';
        this.log.info(`rate limits: Redis is back; ${this.script.shared} are shared again`);
      }
      return fromReply(reply);
    } catch (err) {
      if (this.current === 'redis') this.log.warn({ err: (err as Error).message }, `rate limits: Redis unavailable; falling back to per-gateway ${this.script.shared}`);
      this.current = 'local-fallback';
      this.fallbackUntil = Date.now() + this.retryIntervalMs;
      return this.fallback(fallback);
    }
  }

  async shutdown(): Promise<void> {
    await this.local.shutdown();
    await this.redisOptions.closeClient?.();
  }

  /** EVALSHA, loading the script with EVAL the first time a Redis has not seen it. */
  private async runScript(key: string, scriptArguments: string[]): Promise<unknown> {
    const args = { keys: [this.keyPrefix + key], arguments: scriptArguments };
    try {
      return await this.redis.evalSha(this.sha, args);
    } catch (err) {
      if (!String((err as Error).message).includes('NOSCRIPT')) throw err;
      return this.redis.eval(this.script.source, args);
    }
  }

  private fallback<T>(decide: () => T): T {
    this.fallbackDecisions++;
    return decide();
  }

  private withTimeout<T>(promise: Promise<T>): Promise<T> {
    return withinDeadline(promise, this.commandTimeoutMs, () => {
      throw new Error(`Redis did not answer within ${this.commandTimeoutMs} ms`);
    });
  }
}
