/**
 * A tenant's sites (where its forms live: the site key, the origins allowed to submit) and each
 * site's CAPTCHA provider, whose secret is stored sealed and never shown again.
 */
import { randomBytes } from 'node:crypto';
import { newId as id } from '../../accounts/index.ts';
import { notFound, validationFailed } from '../errors.ts';
import type { CaptchaProvider, Site } from '../model.ts';
import { now, type Actor, type AdminContext } from './context.ts';
import { siteView } from './views.ts';

interface SiteBody { name?: string; allowedOrigins?: string[]; active?: boolean }
interface CaptchaBody { provider: CaptchaProvider; siteKey: string; secret?: string; scoreThreshold?: number }

export class SiteAdmin {
  constructor(private readonly c: AdminContext) {}

  async create(actor: Actor, body: unknown) {
    this.c.require(actor, 'admin');
    const input = this.c.validateBody<SiteBody>('CreateSite', body);
    const site: Site = {
      id: id('site'),
      tenantId: actor.tenantId,
      name: input.name!,
      siteKey: `sk_${randomBytes(16).toString('base64url')}`,
      active: input.active ?? true,
      allowedOrigins: unique(input.allowedOrigins ?? []),
      createdAt: now(),
      updatedAt: now(),
    };
    return siteView(await this.c.store.sites.put(site));
  }

  list(actor: Actor) {
    return this.c.store.sites.filter((site) => site.tenantId === actor.tenantId).map(siteView);
  }

  get(actor: Actor, siteId: string) {
    return siteView(this.c.site(actor, siteId));
  }

  async update(actor: Actor, siteId: string, body: unknown) {
    this.c.require(actor, 'admin');
    const site = this.c.site(actor, siteId);
    const input = this.c.validateBody<SiteBody>('UpdateSite', body);
    return siteView(await this.c.change(this.c.store.sites, site.id, 'Site', (current) => ({
      ...current,
      ...(input.name !== undefined ? { name: input.name } : {}),
      ...(input.active !== undefined ? { active: input.active } : {}),
      ...(input.allowedOrigins !== undefined ? { allowedOrigins: unique(input.allowedOrigins) } : {}),
    })));
  }

  /**
   * Sets the site's CAPTCHA provider. Without `secret`, the stored secret is kept when the
   * provider stays the same (to change the site key or threshold); with another provider the
   * site has none until one is given, and submissions are refused meanwhile.
   */
  async setCaptcha(actor: Actor, siteId: string, body: unknown) {
    this.c.require(actor, 'admin');
    const site = this.c.site(actor, siteId);
    const input = this.c.validateBody<CaptchaBody>('SetCaptcha', body);
    if (input.scoreThreshold !== undefined && input.provider !== 'recaptcha_v3') {
      throw validationFailed('scoreThreshold', 'applies to recaptcha_v3 only');
    }
    const sealed = input.secret === undefined ? undefined : this.c.secrets.seal(input.secret);
    return siteView(await this.c.change(this.c.store.sites, site.id, 'Site', (current) => {
      const secretSealed = sealed ?? (current.captcha?.provider === input.provider ? current.captcha.secretSealed : undefined);
      const captcha = {
        provider: input.provider,
        siteKey: input.siteKey,
        ...(secretSealed !== undefined ? { secretSealed } : {}),
        ...(input.provider === 'recaptcha_v3' ? { scoreThreshold: input.scoreThreshold ?? 0.5 } : {}),
      };
      return { ...current, captcha };
    }));
  }

  /** Removes the provider's secret but keeps the provider: submissions are refused (503) until a secret is set. */
  async removeCaptchaSecret(actor: Actor, siteId: string) {
    this.c.require(actor, 'admin');
    const site = this.c.site(actor, siteId);
    return siteView(await this.c.change(this.c.store.sites, site.id, 'Site', (current) => {
      if (!current.captcha) throw notFound('CAPTCHA configuration');
      const { secretSealed: _removed, ...captcha } = current.captcha;
      return { ...current, captcha };
    }));
  }

  async removeCaptcha(actor: Actor, siteId: string) {
    this.c.require(actor, 'admin');
    const site = this.c.site(actor, siteId);
    return siteView(await this.c.change(this.c.store.sites, site.id, 'Site', ({ captcha: _removed, ...current }) => current));
  }
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}
