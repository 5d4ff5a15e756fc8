/**
 * Alert notifications as the relay's own notifications: to the recipients and webhooks of the
 * form a rule names, stored and queued by the intake like any other, so they get the same
 * retries, dead jobs and manual retry as submissions. The notification's id (derived from the
 * rule and its transition) is the submission's, so a notification handed over twice — an
 * evaluator that died after handing it over — is one submission, and each destination gets it once.
 */
import type { AlertNotification } from '../alerts/index.ts';
import type { Logger } from '../core/log.ts';
import type { RelayIntake } from './intake.ts';
import { CHANNELS } from './model.ts';
import { formTargets } from './public.ts';
import { sanitizeSubject } from './sanitize.ts';
import type { RelayStore } from './store.ts';
import { escapeHtml } from './templates.ts';

const HEADLINES = { firing: 'FIRING', repeat: 'STILL FIRING', resolved: 'RESOLVED' } as const;

export function alertNotifier(store: RelayStore, intake: RelayIntake, log: Logger): (notification: AlertNotification) => Promise<void> {
  return async ({ id, rule, transition }) => {
    const site = rule.notify && store.sites.get(rule.notify.siteId);
    const form = rule.notify && store.forms.get(rule.notify.formId);
    if (!site || site.tenantId !== rule.tenantId || !form || form.siteId !== site.id || !form.active) {
      // The form was removed or deactivated after the rule named it: the console shows the rule without one.
      log.warn({ ruleId: rule.id, tenantId: rule.tenantId, notify: rule.notify }, 'alert notification not sent: the rule names no active form of its tenant');
      return;
    }
    const headline = HEADLINES[transition.kind as keyof typeof HEADLINES] ?? transition.kind.toUpperCase();
    const value = transition.value === null ? 'no data' : String(transition.value);
    const data = {
      alert: rule.name,
      state: transition.to,
      event: transition.kind,
      value: transition.value,
      comparator: rule.comparator,
      threshold: rule.threshold,
      windowSeconds: rule.windowSeconds,
      labels: rule.labels,
      ruleId: rule.id,
      at: new Date(transition.at).toISOString(),
    };
    const body = `<p><strong>${escapeHtml(headline)}</strong>: ${escapeHtml(rule.name)}</p>`
      + `<p>Value ${escapeHtml(value)} (${escapeHtml(rule.comparator)} ${escapeHtml(String(rule.threshold))} over ${rule.windowSeconds} s) at ${escapeHtml(data.at)}.</p>`;
    await intake.store(
      {
        tenantId: rule.tenantId,
        siteId: site.id,
        formId: form.id,
        kind: 'notification',
        data,
        subject: sanitizeSubject(`[${headline}] ${rule.name}`),
        body,
        meta: { ip: '', origin: 'sluice alerts', userAgent: '', apiKeyId: '' },
      },
      formTargets(form, CHANNELS),
      undefined,
      { id, at: transition.at },
    );
  };
}
