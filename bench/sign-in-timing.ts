/**
 * How long a refused sign-in takes by the number of accounts its email has (accounts/sign-in.ts
 * checks the password against each, side by side on the thread pool): the residual timing hint
 * docs/reference/relay.md names under "An email is unique within its tenant". Emails with 0 to 4 accounts,
 * a wrong password, the median of `--runs` attempts each.
 *
 * usage: node --import tsx bench/sign-in-timing.ts [--runs 15]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AccountStore, signIn } from '../accounts/index.ts';
import { LocalStateStore } from '../state/local.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '15' } } });
const runs = Number(values.runs);
const MOST = 4;

const dir = await mkdtemp(join(tmpdir(), 'sluice-sign-in-timing-'));
const accounts = new AccountStore(new LocalStateStore(dir));
await accounts.start();
const emailWith = (n: number) => `accounts-${n}@timing.test`;
for (let t = 0; t < MOST; t++) {
  const tenant = await accounts.tenants.put({ id: `ten_${t}`, name: `Tenant ${t}`, createdAt: '', updatedAt: '' });
  // The email of n accounts has one in each of the tenants 0 … n-1.
  for (let n = t + 1; n <= MOST; n++) {
    await accounts.createUser(tenant.id, { email: emailWith(n), name: '', role: 'member', password: 'the right password', oneTime: false });
  }
}
for (let n = 0; n <= MOST; n++) {
  const times: number[] = [];
  for (let r = 0; r < runs; r++) {
    const started = performance.now();
    await signIn(accounts, { email: emailWith(n), password: 'a wrong password' });
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  console.log(`${n} account(s): median ${times[Math.floor(runs / 2)]!.toFixed(1)} ms`);
}
accounts.shutdown();
await rm(dir, { recursive: true, force: true });
