/**
 * What the operator can do from the command line (`sluice relay ...`): enough to script a
 * tenant, a site, a form, its recipients and webhooks, and an API key without the HTTP API.
 * Every operation runs as the operator actor of one tenant, named by --tenant or found from
 * the --site given.
 */
import { notFound, validationFailed } from './errors.ts';
import type { Actor, RelayAdmin } from './admin/index.ts';
import type { RelayStore } from './store.ts';

export type OperatorInput = Record<string, string | string[] | boolean | undefined>;

const str = (input: OperatorInput, name: string): string => {
  const value = input[name];
  if (typeof value !== 'string' || value === '') throw validationFailed(name, `--${name} is required`);
  return value;
};

/** `--active true|false`, never read loosely: anything else is refused, not taken as false. */
function active(input: OperatorInput): { active?: boolean } {
  const value = input.active;
  if (value === undefined) return {};
  if (value === 'true' || value === 'false') return { active: value === 'true' };
  throw validationFailed('active', '--active must be true or false');
}

/** `--origin O ...` replaces the list; `--clear-origins` empties it (the site then takes any origin). */
function origins(input: OperatorInput): { allowedOrigins?: string[] } {
  if (input['clear-origins'] === true) {
    if (input.origin) throw validationFailed('origin', 'give --origin or --clear-origins, not both');
    return { allowedOrigins: [] };
  }
  return input.origin ? { allowedOrigins: [input.origin].flat() as string[] } : {};
}

/** A whole number option, refused when it is anything else. */
function integer(input: OperatorInput, name: string): number | undefined {
  const value = input[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^\d+$/.test(value)) throw validationFailed(name, `--${name} must be a whole number`);
  return Number(value);
}

function actorFor(store: RelayStore, input: OperatorInput): Actor {
  if (typeof input.tenant === 'string' && input.tenant) {
    if (!store.accounts.tenants.get(input.tenant)) throw notFound('Tenant');
    return { tenantId: input.tenant, role: 'operator' };
  }
  if (typeof input.site === 'string' && input.site) {
    const site = store.sites.get(input.site);
    if (!site) throw notFound('Site');
    return { tenantId: site.tenantId, role: 'operator' };
  }
  throw validationFailed('tenant', 'give --tenant (or --site)');
}

type Operation = (admin: RelayAdmin, actor: () => Actor, input: OperatorInput) => unknown;

export const OPERATOR_COMMANDS: Record<string, Operation> = {
  onboard: (admin, _actor, input) => admin.tenants.onboard({ name: str(input, 'tenant'), owner: { email: str(input, 'owner') } }),
  'tenants list': (admin) => admin.tenants.list(),
  'sites create': (admin, actor, input) => admin.sites.create(actor(), { name: str(input, 'name'), ...origins(input), ...active(input) }),
  'sites list': (admin, actor) => admin.sites.list(actor()),
  'sites update': (admin, actor, input) =>
    admin.sites.update(actor(), str(input, 'site'), { ...(input.name ? { name: input.name } : {}), ...origins(input), ...active(input) }),
  'captcha set': (admin, actor, input) =>
    admin.sites.setCaptcha(actor(), str(input, 'site'), {
      provider: str(input, 'provider'),
      siteKey: str(input, 'site-key'),
      ...(input.secret !== undefined ? { secret: str(input, 'secret') } : {}),
      ...(input['score-threshold'] ? { scoreThreshold: Number(input['score-threshold']) } : {}),
    }),
  'captcha clear-secret': (admin, actor, input) => admin.sites.removeCaptchaSecret(actor(), str(input, 'site')),
  'captcha remove': (admin, actor, input) => admin.sites.removeCaptcha(actor(), str(input, 'site')),
  'forms create': (admin, actor, input) =>
    admin.forms.create(actor(), str(input, 'site'), { name: str(input, 'name'), ...(input.key ? { formKey: input.key } : {}), ...active(input) }),
  'forms list': (admin, actor, input) => admin.forms.list(actor(), str(input, 'site')),
  'forms update': (admin, actor, input) =>
    admin.forms.update(actor(), str(input, 'site'), str(input, 'form'), {
      ...(input.name ? { name: input.name } : {}),
      ...active(input),
      ...(input.template !== undefined ? { templateId: input.template === 'none' ? null : str(input, 'template') } : {}),
    }),
  'recipients add': (admin, actor, input) =>
    admin.forms.addRecipient(actor(), str(input, 'site'), str(input, 'form'), { channel: str(input, 'channel'), address: str(input, 'address'), ...active(input) }),
  'recipients update': (admin, actor, input) => {
    const { active: value } = active(input);
    if (value === undefined) throw validationFailed('active', '--active true|false is required');
    return admin.forms.updateRecipient(actor(), str(input, 'site'), str(input, 'form'), str(input, 'recipient'), { active: value });
  },
  'recipients remove': (admin, actor, input) => admin.forms.removeRecipient(actor(), str(input, 'site'), str(input, 'form'), str(input, 'recipient')),
  'submissions list': (admin, actor, input) => {
    const limit = integer(input, 'limit');
    return admin.forms.listSubmissions(actor(), str(input, 'site'), str(input, 'form'), { ...(limit !== undefined ? { limit } : {}), ...(input.before ? { before: str(input, 'before') } : {}) });
  },
  'jobs list': (admin, actor, input) => {
    const limit = integer(input, 'limit');
    return admin.delivery.listJobs(actor(), str(input, 'site'), str(input, 'form'), { ...(limit !== undefined ? { limit } : {}), ...(input.state ? { state: str(input, 'state') } : {}) });
  },
  'jobs show': (admin, actor, input) => admin.delivery.getJob(actor(), str(input, 'job')),
  'jobs retry': (admin, actor, input) => admin.delivery.retryJob(actor(), str(input, 'job')),
  'jobs retry-dead': (admin, actor, input) => admin.delivery.retryDeadJobs(actor(), str(input, 'site'), str(input, 'form')),
  'inbox list': (admin, actor, input) => {
    const limit = integer(input, 'limit');
    const waitFor = integer(input, 'wait-for');
    const query = { ...(limit !== undefined ? { limit } : {}), ...(waitFor !== undefined ? { waitFor } : {}) };
    // Without --tenant: every tenant's messages, the operator's view.
    return input.tenant ? admin.inbox.list(actor().tenantId, query) : admin.inbox.listAll(query);
  },
  'delivery show': (admin, actor) => admin.delivery.getSettings(actor()),
  'delivery set-email': (admin, actor, input) =>
    // The SMTP URL holds a password: it comes from --secret-file, never the command line.
    admin.delivery.putSettings(actor(), { email: { ...(input.from ? { from: str(input, 'from') } : {}), ...(input.secret !== undefined ? { smtpUrl: str(input, 'secret') } : {}) } }),
  'delivery set-whatsapp': (admin, actor, input) =>
    admin.delivery.putSettings(actor(), {
      whatsapp: {
        phoneNumberId: str(input, 'phone-number-id'),
        token: str(input, 'secret'),
        ...(input.template ? { template: { name: str(input, 'template'), language: str(input, 'language') } } : {}),
      },
    }),
  'delivery clear': (admin, actor, input) => admin.delivery.putSettings(actor(), { [str(input, 'channel')]: null }),
  'webhooks add': (admin, actor, input) => admin.forms.addWebhook(actor(), str(input, 'site'), str(input, 'form'), { url: str(input, 'url') }),
  'api-keys create': (admin, actor, input) => admin.apiKeys.create(actor(), { siteId: str(input, 'site'), name: str(input, 'name') }),
  'api-keys list': (admin, actor) => admin.apiKeys.list(actor()),
  'api-keys revoke': (admin, actor, input) => admin.apiKeys.revoke(actor(), str(input, 'key')),
  'users create': (admin, actor, input) => admin.users.create(actor(), { email: str(input, 'email'), role: str(input, 'role') }),
  'users list': (admin, actor) => admin.users.list(actor()),
  handover: (admin, actor) => admin.handovers.create(actor()),
  'handovers list': (admin, actor) => admin.handovers.list(actor()),
  'handovers revoke': async (admin, actor, input) => {
    await admin.handovers.revoke(actor(), str(input, 'claim'));
    return { revoked: str(input, 'claim') };
  },
};

export async function runOperatorCommand(admin: RelayAdmin, store: RelayStore, command: string, input: OperatorInput): Promise<unknown> {
  // Own keys only: the command name comes from the control socket, and `constructor` is no command.
  if (!Object.hasOwn(OPERATOR_COMMANDS, command)) throw new Error(`unknown relay command: ${command}`);
  const operation = OPERATOR_COMMANDS[command]!;
  return operation(admin, () => actorFor(store, input), input);
}
