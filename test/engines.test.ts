/**
 * package.json's `engines` says which Node versions Sluice runs on: every dependency (the dev
 * ones too: `npm test` is one of the two commands) must accept the lowest version of each
 * range it names, and Node 20 and 24 LTS, the versions CI runs, must be in it.
 */
import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const packageJson = (path: string) => JSON.parse(readFileSync(new URL(`../${path}package.json`, import.meta.url), 'utf8'));
const pkg = packageJson('');
const ours: string = pkg.engines.node;

describe('package.json engines', () => {
  it('covers the Node versions CI runs', () => {
    expect(semver.satisfies('20.20.2', ours)).toBe(true);
    expect(semver.satisfies('24.0.0', ours)).toBe(true);
  });

  it('asks no less than any dependency needs', () => {
    const lowest = ours.split('||').map((part) => semver.minVersion(part.trim())!.version);
    const refused: string[] = [];
    for (const name of [...Object.keys(pkg.dependencies), ...Object.keys(pkg.devDependencies)]) {
      const needs: string | undefined = packageJson(`node_modules/${name}/`).engines?.node;
      if (!needs) continue;
      for (const version of lowest) if (!semver.satisfies(version, needs)) refused.push(`${name} needs ${needs}, not ${version}`);
    }
    expect(refused).toEqual([]);
  });
});
