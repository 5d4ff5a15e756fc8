/**
 * RedisTokenBucketLimiter: the cluster driver of the per-IP token buckets. Every gateway takes
 * tokens from the same bucket in Redis; Redis being down or slow is handled by the shared
 * RedisScriptLimiter (fallback to local buckets, back to Redis on its own).
 */
import type { Logger } from '../core/log.ts';
import { TokenBucketLimiter, type TokenBucketOptions } from './limiter.ts';
import { RedisScriptLimiter, type RedisScriptOptions, type RedisScripts } from './redis-script-limiter.ts';

export type { RedisScripts } from './redis-script-limiter.ts';

export interface RedisLimiterOptions extends TokenBucketOptions, RedisScriptOptions {}

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

export class RedisTokenBucketLimiter extends RedisScriptLimiter {
  private readonly args: string[];

  constructor(redis: RedisScripts, options: RedisLimiterOptions, log: Logger) {
    super(redis, { source: TAKE_TOKEN, shared: 'buckets', defaultKeyPrefix: 'sluice:rl:' }, new TokenBucketLimiter(options), options, log);
    this.args = [String(options.ratePerMinute / 60_000), String(options.burst)];
  }

  protected scriptArguments(): string[] {
    return this.args;
  }
}
