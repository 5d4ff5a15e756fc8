/**
 * How long the relay's renders hold `sluice serve`'s event loop. A target of its own (an SMTP
 * inbox in this process as its mail server) gets, one window after the other: the findings'
 * 823 KB preview as a member and as an admin, a preview over the size limit, the largest preview
 * within it, and ten submissions at the documented maximum to a form with an email recipient,
 * until all ten mails arrived. Each window's event-loop delay is the server's own
 * `perf_hooks.monitorEventLoopDelay` histogram (prom-client's, 10 ms resolution, reset by every
 * /metrics scrape): its p99 and max over the window, read from /metrics at the window's end.
 *
 * usage: node --import tsx bench/render-stalls.ts [--repeat 10]
 */
import { parseArgs } from 'node:util';
import { startSmtpInbox } from '../test/delivery-peers.ts';
import { fieldsBombPreview, fieldsOf, maximumData } from '../test/relay-fixture.ts';
import { peakRssMiB, startTarget } from './target.ts';

const { values } = parseArgs({ options: { repeat: { type: 'string', default: '10' } } });
const repeat = Number(values.repeat);
const PASSWORD = 'a long bench password';

const smtp = await startSmtpInbox();
const target = await startTarget('sluice', { SLUICE_SMTP_URL: smtp.url, SLUICE_SMTP_FROM: 'relay@bench.example' });
try {
  const relay = `${target.relayUrl}/api/v1`;
  const call = async (method: string, path: string, body?: unknown, token?: string) => {
    const headers: Record<string, string> = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
    const response = await fetch(relay + path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: response.status, body: (await response.json()) as any };
  };
  const signIn = async (email: string, password: string) => (await call('POST', '/admin/login', { email, password })).body.token as string;

  const onboarded = (await target.cli('relay', 'onboard', '--tenant', 'Renders', '--owner', 'owner@renders.example')) as { oneTimePassword: string };
  const first = await signIn('owner@renders.example', onboarded.oneTimePassword);
  const owner = (await call('POST', '/admin/me/password', { currentPassword: onboarded.oneTimePassword, newPassword: PASSWORD }, first)).body.token as string;
  await call('POST', '/admin/users', { email: 'member@renders.example', role: 'member', password: PASSWORD }, owner);
  const member = await signIn('member@renders.example', PASSWORD);
  const site = (await call('POST', '/admin/sites', { name: 'Renders' }, owner)).body;
  /** A form of the site whose one recipient is `address`. */
  const formTo = async (formKey: string, address: string) => {
    const form = (await call('POST', `/admin/sites/${site.id}/forms`, { name: formKey, formKey }, owner)).body;
    await call('POST', `/admin/sites/${site.id}/forms/${form.id}/recipients`, { channel: 'email', address }, owner);
    return form;
  };
  const delivered = await formTo('contact', 'sales@renders.example');
  // The inbox refuses this recipient: its messages are rendered, then refused before any is encoded for SMTP.
  const refused = await formTo('refused', 'nobody@renders.example');
  smtp.refuse.set('nobody@renders.example', 550);

  /** The server's event-loop delay figures in ms (p99, max) since the last scrape. */
  const loopDelay = async () => {
    const metrics = await (await fetch(`${target.url}/metrics`)).text();
    const ms = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1]) * 1000;
    return { p99: ms('nodejs_eventloop_lag_p99_seconds'), max: ms('nodejs_eventloop_lag_max_seconds') };
  };
  const rows: string[] = [];
  /** Runs `load` as one window and reports the delay the server's loop saw meanwhile. */
  const window = async (what: string, load: () => Promise<number[]>) => {
    await loopDelay();
    const started = performance.now();
    const statuses = await load();
    const seconds = (performance.now() - started) / 1000;
    const { p99, max } = await loopDelay();
    const answers = [...new Set(statuses)].map((status) => `${statuses.filter((s) => s === status).length}× ${status}`).join(', ');
    rows.push(`| ${what} | ${answers} | ${seconds.toFixed(1)} | ${p99.toFixed(1)} | ${max.toFixed(1)} | ${peakRssMiB(target.pid).toFixed(0)} |`);
  };
  const times = async (send: () => Promise<number>) => {
    const statuses: number[] = [];
    for (let i = 0; i < repeat; i++) statuses.push(await send());
    return statuses;
  };
  const preview = (body: unknown, token: string) => async () => (await call('POST', '/admin/templates/preview', body, token)).status;

  await window('idle, 2 s', async () => (await new Promise((resolve) => setTimeout(resolve, 2000)), []));
  await window('the 823 KB {{@fields}} × 2,000 preview, member', () => times(preview(fieldsBombPreview(), member)));
  await window('the same, admin', () => times(preview(fieldsBombPreview(), owner)));
  await window('preview over the size limit ({{ @fields }} × 2, 100 × 9,000 `<`)', () => times(preview({ html: '{{ @fields }}{{ @fields }}', data: fieldsOf(100, 9000) }, owner)));
  await window('the largest preview within it (default template, maximum data)', () => times(preview({ data: maximumData() }, owner)));
  /** Ten submissions at the documented maximum to `form` at once; resolves once `done(jobs)` says its jobs are through. */
  const tenMaximum = (form: { id: string; formKey: string }, done: (jobs: Array<{ state: string }>) => boolean) => async () => {
    const body = JSON.stringify({ siteKey: site.siteKey, formKey: form.formKey, data: maximumData() });
    const submit = async () => (await fetch(`${relay}/submissions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).status;
    const statuses = await Promise.all(Array.from({ length: 10 }, submit));
    const deadline = Date.now() + 120_000;
    while (!done((await call('GET', `/admin/sites/${site.id}/forms/${form.id}/jobs`, undefined, owner)).body.jobs)) {
      if (Date.now() > deadline) throw new Error(`the jobs of ${form.formKey} were not through in 2 minutes`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return statuses;
  };
  const all = (state: string) => (jobs: Array<{ state: string }>) => jobs.length === 10 && jobs.every((job) => job.state === state);
  await window('ten maximum submissions at once, the recipient refused at RCPT TO: rendered, not encoded', tenMaximum(refused, all('dead')));
  await window('ten maximum submissions at once, until their ten emails were delivered', tenMaximum(delivered, all('delivered')));

  console.log(`\nsluice serve's event-loop delay (monitorEventLoopDelay, 10 ms resolution: idle reads about 10), ${repeat} requests a preview window:\n`);
  console.log('| window | answers | seconds | p99 ms | max ms | peak RSS MiB |\n|---|---|---:|---:|---:|---:|');
  for (const row of rows) console.log(row);
} finally {
  await target.stop();
  await smtp.stop();
}
