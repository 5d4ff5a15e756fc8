/**
 * RedisBackoffLockout: the cluster driver of the lockout with backoff (gateway/lockout.ts).
 * Every gateway counts in the same hash in Redis, on Redis's own clock; Redis being down or slow
 * is handled by the shared RedisScriptLimiter (fallback to a local BackoffLockout, back to Redis
 * on its own).
 */
import type { Logger } from '../core/log.ts';
import { BackoffLockout, type Lockout, type LockoutOptions } from './lockout.ts';
import { RedisScriptLimiter, type RedisScriptOptions, type RedisScripts } from './redis-script-limiter.ts';

/** The lockout (failures, lockoutMs, maxLockoutMs) and the Redis options; keyPrefix defaults to 'sluice:lockout:'. */
export interface RedisLockoutOptions extends LockoutOptions, RedisScriptOptions {}

/**
 * KEYS[1] a hash {failures, level, until}; ARGV: 'take', failures, lockout ms, longest lockout
 * ms — or 'reset', which deletes the hash. Returns {allowed (0|1), retry-after seconds}, as
 * BackoffLockout decides. Numbers are written with '%.0f' (Lua's own format keeps 14 digits,
 * which would round the clock); the hash expires `longest` ms after its last take or lockout end.
 */
const TAKE_OR_RESET = `
if ARGV[1] == 'reset' then
  redis.call('DEL', KEYS[1])
  return {1, 0}
end
local threshold = tonumber(ARGV[2])
local first = tonumber(ARGV[3])
local longest = tonumber(ARGV[4])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local held = redis.call('HMGET', KEYS[1], 'failures', 'level', 'until')
local failures = tonumber(held[1]) or 0
local level = tonumber(held[2]) or 0
local lockedUntil = tonumber(held[3]) or 0
if lockedUntil > now then
  return {0, math.max(1, math.min(math.ceil(longest / 1000), math.ceil((lockedUntil - now) / 1000)))}
end
failures = failures + 1
if failures >= threshold then
  lockedUntil = now + math.min(longest, first * 2 ^ math.min(level, 31))
  level = math.min(level + 1, 31)
  failures = 0
end
redis.call('HSET', KEYS[1], 'failures', failures, 'level', level, 'until', string.format('%.0f', lockedUntil))
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.max(lockedUntil - now, 0) + longest))
return {1, 0}`;

export class RedisBackoffLockout extends RedisScriptLimiter implements Lockout {
  private readonly takeArguments: string[];
  private readonly localLockout: BackoffLockout;

  constructor(redis: RedisScripts, options: RedisLockoutOptions, log: Logger) {
    const local = new BackoffLockout(options);
    super(redis, { source: TAKE_OR_RESET, shared: 'lockouts', defaultKeyPrefix: 'sluice:lockout:' }, local, options, log);
    this.localLockout = local;
    this.takeArguments = ['take', String(options.failures), String(options.lockoutMs), String(options.maxLockoutMs)];
  }

  protected scriptArguments(): string[] {
    return this.takeArguments;
  }

  async reset(key: string): Promise<void> {
    await this.runOrFallBack(key, ['reset'], () => undefined, () => this.localLockout.reset(key));
  }
}
