/**
 * `sluice relay ...`: the relay's operator commands (relay/operator.ts runs them) and the
 * options each takes. Every command runs as the operator of one tenant, named by --tenant or
 * found from the --site given. Secrets come from --secret-file (or stdin), never from argv.
 */
import type { SluiceCommand } from './cli-command.ts';

const REQUIRED = { required: true };
const ACTIVE = ['--active <true|false>', 'true or false, nothing else'] as const;
const SECRET_FILE = '--secret-file <FILE>';

/** Adds the operator commands under `relay`; each leaf's words after `relay` name its operation. */
export function addRelayCommands(relay: SluiceCommand): void {
  const group = (name: string, description: string) => relay.command(name).description(description);
  const tenant = (command: SluiceCommand) => command.value('--tenant <ID>', 'the tenant', REQUIRED);
  const site = (command: SluiceCommand) => command.value('--site <ID>', 'the site (and so its tenant)', REQUIRED);
  const form = (command: SluiceCommand) => site(command).value('--form <ID>', 'the form', REQUIRED);

  relay.command('onboard').description("create a relay tenant and its owner; prints the owner's one-time password")
    .value('--tenant <NAME>', "the tenant's name", REQUIRED).value('--owner <EMAIL>', "the owner's email address", REQUIRED);

  group('tenants', 'relay tenants').command('list').description('every tenant');

  const sites = group('sites', 'the web sites that post forms');
  tenant(sites.command('create').description('create a site; prints it with its site key'))
    .value('--name <NAME>', "the site's name", REQUIRED)
    .values('--origin <ORIGIN>', 'an origin its forms are posted from, e.g. https://example.com (repeat for more; none: any origin)')
    .value(...ACTIVE);
  tenant(sites.command('list').description("the tenant's sites"));
  site(sites.command('update').description('rename a site, replace its origins, (de)activate it'))
    .value('--name <NAME>', 'a new name')
    .values('--origin <ORIGIN>', 'replaces the origins (repeat for more)')
    .option('--clear-origins', 'remove every origin (the site then takes any origin)')
    .value(...ACTIVE);

  const captcha = group('captcha', "a site's captcha");
  site(captcha.command('set').description("require a captcha on the site's forms"))
    .value('--provider <PROVIDER>', 'recaptcha_v2, recaptcha_v3, hcaptcha or turnstile', REQUIRED)
    .value('--site-key <KEY>', "the provider's site key", REQUIRED)
    .value(SECRET_FILE, "a file holding the provider's secret (- for stdin)")
    .value('--score-threshold <SCORE>', 'recaptcha_v3 only: the lowest score accepted (default 0.5)');
  site(captcha.command('clear-secret').description('forget the secret (the site then refuses every submission)'));
  site(captcha.command('remove').description('no captcha on the site'));

  const forms = group('forms', "a site's forms");
  site(forms.command('create').description('create a form'))
    .value('--name <NAME>', "the form's name", REQUIRED)
    .value('--key <FORM_KEY>', 'the key web pages post with (letters, digits, _ and -; generated if absent)')
    .value(...ACTIVE);
  site(forms.command('list').description("the site's forms and their recipients"));
  form(forms.command('update').description('rename a form, (de)activate it, choose its email template'))
    .value('--name <NAME>', 'a new name')
    .value(...ACTIVE)
    .value('--template <ID>', 'the email template, or none for the default');

  const recipients = group('recipients', "who a form's submissions are sent to");
  form(recipients.command('add').description("send the form's submissions to an email address or a WhatsApp number"))
    .value('--channel <CHANNEL>', 'email or whatsapp', REQUIRED)
    .value('--address <ADDRESS>', 'the email address or the phone number (+4915112345678)', REQUIRED)
    .value(...ACTIVE);
  form(recipients.command('update').description('(de)activate a recipient'))
    .value('--recipient <ID>', 'the recipient', REQUIRED)
    .value(ACTIVE[0], ACTIVE[1], REQUIRED);
  form(recipients.command('remove').description('remove a recipient')).value('--recipient <ID>', 'the recipient', REQUIRED);

  form(group('webhooks', "a form's webhooks").command('add').description("post the form's submissions to a URL; prints the signing secret once"))
    .value('--url <URL>', 'where to post', REQUIRED);

  const apiKeys = group('api-keys', 'API keys for backends sending notifications');
  site(apiKeys.command('create').description('issue an API key for a site; prints the key once')).value('--name <NAME>', "the key's name", REQUIRED);
  tenant(apiKeys.command('list').description("the tenant's API keys (never the keys)"));
  tenant(apiKeys.command('revoke').description('revoke an API key')).value('--key <KEY_ID>', 'the key', REQUIRED);

  const users = group('users', "a tenant's users");
  tenant(users.command('create').description('create a user; prints a one-time password'))
    .value('--email <EMAIL>', 'their email address', REQUIRED)
    .value('--role <ROLE>', 'owner, admin or member', REQUIRED);
  tenant(users.command('list').description("the tenant's users"));

  form(group('submissions', "a form's submissions").command('list').description('submissions, newest first'))
    .value('--limit <N>', 'at most N (a whole number)')
    .value('--before <CURSOR>', "the previous page's nextBefore");

  const jobs = group('jobs', 'delivery jobs (one per submission and recipient or webhook)');
  form(jobs.command('list').description("a form's delivery jobs, dead first"))
    .value('--state <STATE>', 'queued, sending, delivered, failed, dead or withdrawn')
    .value('--limit <N>', 'at most N (a whole number)');
  tenant(jobs.command('show').description('a delivery job and every attempt')).value('--job <ID>', 'the job', REQUIRED);
  tenant(jobs.command('retry').description('retry a dead job (a fresh series of attempts)')).value('--job <ID>', 'the job', REQUIRED);
  form(jobs.command('retry-dead').description('retry every dead job of a form'));

  group('inbox', 'the development inbox (SLUICE_DELIVERY_INBOX): what delivery would have sent').command('list')
    .description('messages kept instead of sent, newest first')
    .value('--tenant <ID>', "one tenant's (default: every tenant's)")
    .value('--limit <N>', 'at most N (a whole number, default 50, at most 1000)')
    .value('--wait-for <N>', 'wait up to 30 s until at least N messages are there (delivery runs a moment after a submission)');

  const delivery = group('delivery', "a tenant's own email and WhatsApp settings (else the server's)");
  tenant(delivery.command('show').description('the settings (never the secrets)'));
  tenant(delivery.command('set-email').description('send email as this tenant'))
    .value('--from <ADDRESS>', 'the From address')
    .value(SECRET_FILE, 'a file holding the SMTP URL with its credentials (- for stdin)');
  tenant(delivery.command('set-whatsapp').description("send WhatsApp messages from the tenant's number"))
    .value('--phone-number-id <ID>', "the WhatsApp Cloud API's phone number id", REQUIRED)
    .value(SECRET_FILE, 'a file holding the access token (- for stdin)', REQUIRED)
    .value('--template <NAME>', 'an approved message template')
    .value('--language <CODE>', "the template's language, e.g. en_US (with --template)");
  tenant(delivery.command('clear').description("back to the server's settings for a channel"))
    .value('--channel <CHANNEL>', 'email or whatsapp', REQUIRED);

  tenant(relay.command('handover').description('a single-use claim token for the client, valid 72 hours'));
  const handovers = group('handovers', "a tenant's open claim tokens");
  tenant(handovers.command('list').description('the claims that could still be redeemed (never their tokens)'));
  tenant(handovers.command('revoke').description('revoke a claim token'))
    .value('--claim <ID>', 'the claim (its id, from `handovers list` or `handover`)', REQUIRED);
}
