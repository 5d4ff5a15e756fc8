/**
 * RedisSlidingWindowLimiter: the cluster driver of the sliding windows. Every gateway counts in
 * the same window in Redis: a sorted set per key, one member per accepted take, scored with
 * Redis's own clock. Redis being down or slow is handled by the shared RedisScriptLimiter
 * (fallback to a local SlidingWindowLimiter, back to Redis on its own).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../core/log.ts';
import { RedisScriptLimiter, type RedisScriptOptions, type RedisScripts } from './redis-script-limiter.ts';
import { SlidingWindowLimiter, type SlidingWindowOptions } from './window-limiter.ts';

/** The window (limit, windowMs) and the Redis options; keyPrefix defaults to 'sluice:rlw:'. */
export interface RedisWindowLimiterOptions extends SlidingWindowOptions, RedisScriptOptions {}

/**
 * KEYS[1] window; ARGV: window ms, limit, a member unique to this take. Returns {allowed (0|1),
 * retry-after seconds}. Scores are written with '%.3f' (Lua's own number format keeps 14
 * digits, which would round the clock to 0.1 ms). The key expires with its newest take, so idle
 * clients cost nothing; Retry-After is capped at the window in case Redis's clock stepped back.
 */
const TAKE_IN_WINDOW = `
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.3f', now - window))
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], string.format('%.3f', now), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window))
  return {1, 0}
end
local oldest = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
return {0, math.max(1, math.min(math.ceil(window / 1000), math.ceil((oldest + window - now) / 1000)))}`;

export class RedisSlidingWindowLimiter extends RedisScriptLimiter {
  private readonly window: string;
  private readonly limit: string;
  /** Members must be unique across gateways: this limiter's random id, then a counter. */
  private readonly memberPrefix = `${randomBytes(6).toString('base64url')}:`;
  private takes = 0;

  constructor(redis: RedisScripts, options: RedisWindowLimiterOptions, log: Logger) {
    super(redis, { source: TAKE_IN_WINDOW, shared: 'windows', defaultKeyPrefix: 'sluice:rlw:' }, new SlidingWindowLimiter(options), options, log);
    this.window = String(options.windowMs);
    this.limit = String(options.limit);
  }

  protected scriptArguments(): string[] {
    return [this.window, this.limit, this.memberPrefix + (this.takes++).toString(36)];
  }
}
