/**
 * RedisTokenBucketLimiter: the cluster driver of the per-IP token buckets. Every gateway takes
 * tokens from the same bucket in Redis, in one atomic Lua script that reads Redis's own clock
 * (gateways' clocks do not matter). If Redis is down or slow, the gateway falls back to its
 * local buckets instead of refusing all traffic, says so once in the log and in `mode`, and
 * tries Redis again every `retryIntervalMs`.
 */
import { createHash } from 'node:crypto';
import type { Logger } from '../core/log.ts';
import { TokenBucketLimiter, type LimitDecision, type Limiter, type TokenBucketOptions } from './limiter.ts';

/** The two commands the limiter needs; a node-redis client has both. */
export interface RedisScripts {
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
}

export interface RedisLimiterOptions extends TokenBucketOptions {
  /** Prefix of the bucket keys. Default 'sluice:rl:'. */
  keyPrefix?: string;
  /** A Redis answer slower than this counts as Redis being down. Default 100 ms. */
  commandTimeoutMs?: number;
  /** While falling back, how often to try Redis again. Default 2000 ms. */
  retryIntervalMs?: number;
  /** Closes the client at shutdown, when the limiter owns it. */
  closeClient?: () => Promise<void>;
}

/**
 * KEYS[1] bucket; ARGV: tokens per ms, bucket size. Returns {allowed (0|1), retry-after seconds}.
 * The bucket expires once it would be full again: idle clients cost no memory.
 */
const TAKE_TOKEN = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local allowed, retry = 0, 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  retry = math.max(1, math.ceil((1 - tokens) / rate / 1000))
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate) + 1000)
return {allowed, retry}`;

const TAKE_TOKEN_SHA = createHash('sha1').update(TAKE_TOKEN).digest('hex');

export class RedisTokenBucketLimiter implements Limiter {
  private readonly local: TokenBucketLimiter;
  private readonly perMs: number;
  private readonly keyPrefix: string;
  private readonly commandTimeoutMs: number;
  private readonly retryIntervalMs: number;
  private fallbackUntil = 0;
  private current: 'redis' | 'local-fallback' = 'redis';
  /** Decisions taken by the local buckets while Redis was unavailable (for /metrics). */
  fallbackDecisions = 0;

  constructor(private readonly redis: RedisScripts, private readonly options: RedisLimiterOptions, private readonly log: Logger) {
    this.local = new TokenBucketLimiter(options);
    this.perMs = options.ratePerMinute / 60_000;
    this.keyPrefix = options.keyPrefix ?? 'sluice:rl:';
    this.commandTimeoutMs = options.commandTimeoutMs ?? 100;
    this.retryIntervalMs = options.retryIntervalMs ?? 2000;
  }

  /** Which buckets decide right now. */
  get mode(): 'redis' | 'local-fallback' {
    return this.current;
  }

  async take(key: string): Promise<LimitDecision> {
    if (this.current === 'local-fallback' && Date.now() < this.fallbackUntil) return this.fallback(key);
    try {
      const [allowed, retry] = (await this.withTimeout(this.runScript(key))) as [number, number];
      if (this.current === 'local-fallback') {
        this.current = 'redis';
        this.log.info('rate limits: Redis is back; buckets are shared again');
      }
      return { allowed: allowed === 1, retryAfterSeconds: retry };
    } catch (err) {
      if (this.current === 'redis') this.log.warn({ err: (err as Error).message }, 'rate limits: Redis unavailable; falling back to per-gateway buckets');
      this.current = 'local-fallback';
      this.fallbackUntil = Date.now() + this.retryIntervalMs;
      return this.fallback(key);
    }
  }

  async shutdown(): Promise<void> {
    await this.local.shutdown();
    await this.options.closeClient?.();
  }

  /** EVALSHA, loading the script with EVAL the first time a Redis has not seen it. */
  private async runScript(key: string): Promise<unknown> {
    const args = { keys: [this.keyPrefix + key], arguments: [String(this.perMs), String(this.options.burst)] };
    try {
      return await this.redis.evalSha(TAKE_TOKEN_SHA, args);
    } catch (err) {
      if (!String((err as Error).message).includes('NOSCRIPT')) throw err;
      return this.redis.eval(TAKE_TOKEN, args);
    }
  }

  private fallback(key: string): LimitDecision {
    this.fallbackDecisions++;
    return this.local.take(key);
  }

  private withTimeout<T>(promise: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`Redis did not answer within ${this.commandTimeoutMs} ms`)), this.commandTimeoutMs);
    });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
  }
}
