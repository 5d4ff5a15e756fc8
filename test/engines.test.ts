/**
 * package.json's `engines` says which Node versions Sluice runs on: every installed package (the
 * dev ones too: `npm test` is one of the two commands; the dependencies of dependencies too:
 * npm warns about them at install) must accept the lowest version of each range it names, but
 * for the waivers below, and Node 20 and 24 LTS, the versions CI runs, must be in it.
 */
import { existsSync, readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const packageJson = (path: string) => JSON.parse(readFileSync(new URL(`../${path}package.json`, import.meta.url), 'utf8'));
const pkg = packageJson('');
const ours: string = pkg.engines.node;
const lock = JSON.parse(readFileSync(new URL('../package-lock.json', import.meta.url), 'utf8'));

/**
 * Packages whose `engines` asks more than they use, by name and the version waived
 * (docs/internals/testing.md says why npm warns). A new version of one is looked at again.
 */
const WAIVED: Record<string, { version: string; why: string }> = {
  '@nats-io/nuid': {
    version: '3.0.0',
    why: 'says node >= 22 but needs only globalThis.crypto.getRandomValues (Node 19+); the NATS client pins it, and CI runs the suite on Node 20',
  },
};

describe('package.json engines', () => {
  it('covers the Node versions CI runs', () => {
    expect(semver.satisfies('20.20.2', ours)).toBe(true);
    expect(semver.satisfies('24.0.0', ours)).toBe(true);
  });

  it('asks no less than any installed package needs, but for the waivers', () => {
    const lowest = ours.split('||').map((part) => semver.minVersion(part.trim())!.version);
    const refused: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages as Record<string, { version?: string; engines?: { node?: string } }>)) {
      const needs = entry.engines?.node;
      // Optional packages for other platforms (wasm32, other CPUs) are in the lock but not installed.
      if (!path || !needs || !existsSync(new URL(`../${path}/package.json`, import.meta.url))) continue;
      const name = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
      if (WAIVED[name]?.version === entry.version) continue;
      for (const version of lowest) if (!semver.satisfies(version, needs)) refused.push(`${name}@${entry.version} needs ${needs}, not ${version}`);
    }
    expect(refused).toEqual([]);
  });
});
