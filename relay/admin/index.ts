/**
 * The relay's admin operations, for the HTTP admin API and the CLI alike, one resource a file:
 * `admin.sites.create(actor, body)`, `admin.forms.addWebhook(…)`, …. Every operation runs for an
 * Actor — a signed-in user of one tenant, or the operator at the command line — and sees only
 * that tenant: anything of another tenant is "not found", never "forbidden", so its existence
 * does not leak (context.ts).
 *
 * Rights: member reads; admin also writes sites, forms, recipients, webhooks, templates and
 * API keys, and manages members and admins; owner also manages owners, the tenant and its
 * handover. The operator (CLI) may do anything within the tenant it names.
 */
import { RelayInbox } from '../inbox.ts';
import { ApiKeyAdmin } from './api-keys.ts';
import { AdminContext } from './context.ts';
import { DeliveryAdmin } from './delivery.ts';
import { FormAdmin } from './forms.ts';
import { HandoverAdmin } from './handover.ts';
import { SiteAdmin } from './sites.ts';
import { TemplateAdmin } from './templates.ts';
import { TenantAdmin } from './tenants.ts';
import { UserAdmin } from './users.ts';

export type { Actor, DeliveryAccess, DeploymentChecks, UrlCheck } from './context.ts';
export { userView } from './views.ts';

export class RelayAdmin {
  /** Tenants (onboarding, the tenant itself) and signing in. */
  readonly tenants: TenantAdmin;
  /** Sites and their CAPTCHA. */
  readonly sites: SiteAdmin;
  /** Forms, their recipients and webhooks, their submissions. */
  readonly forms: FormAdmin;
  /** Delivery jobs, retries and the tenant's delivery settings. */
  readonly delivery: DeliveryAdmin;
  readonly templates: TemplateAdmin;
  readonly users: UserAdmin;
  readonly apiKeys: ApiKeyAdmin;
  readonly handovers: HandoverAdmin;
  /** What the development inbox kept, for the tenant's users and the operator. */
  readonly inbox: RelayInbox;

  /** The parts every resource shares (AdminContext's, in its order). */
  constructor(...parts: ConstructorParameters<typeof AdminContext>) {
    const context = new AdminContext(...parts);
    this.tenants = new TenantAdmin(context);
    this.sites = new SiteAdmin(context);
    this.forms = new FormAdmin(context);
    this.delivery = new DeliveryAdmin(context);
    this.templates = new TemplateAdmin(context);
    this.users = new UserAdmin(context);
    this.apiKeys = new ApiKeyAdmin(context);
    this.handovers = new HandoverAdmin(context);
    this.inbox = new RelayInbox(context.delivery.inbox);
  }
}
