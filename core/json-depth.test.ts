import { describe, expect, it } from 'vitest';
import { nestedDeeperThan } from './json-depth.ts';

describe('nestedDeeperThan', () => {
  it('counts objects and arrays, not brackets inside strings', () => {
    expect(nestedDeeperThan('{"a":[{"b":1}]}', 3)).toBe(false);
    expect(nestedDeeperThan('{"a":[{"b":1}]}', 2)).toBe(true);
    expect(nestedDeeperThan('{"s":"[[[[[[{{{{"}', 1)).toBe(false);
    expect(nestedDeeperThan('{"s":"quote \\" then [[[[["}', 1)).toBe(false);
    expect(nestedDeeperThan('{"s":"backslash \\\\", "t":[[[]]]}', 3)).toBe(true);
  });

  it('scans a million levels without recursing', () => {
    expect(nestedDeeperThan('['.repeat(1_000_000) + ']'.repeat(1_000_000), 512)).toBe(true);
  });
});
