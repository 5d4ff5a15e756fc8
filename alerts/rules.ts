/**
 * A tenant's alert rules, one bucket in the state store (as console/dashboards.ts keeps
 * dashboards): each rule belongs to a tenant and is found only through it (another tenant's id is
 * "not found"). The cap per tenant is taken on a CapLedger, so two processes creating the last
 * rule at once cannot both pass it; a replace is compare-and-set, so two edits land one after the
 * other, never half of each.
 */
import { randomBytes } from 'node:crypto';
import { ApiError } from '../core/errors.ts';
import { CapLedger } from '../state/cap-ledger.ts';
import { recordOf } from '../state/shape.ts';
import type { StateStore } from '../state/store.ts';
import type { AlertRule } from './model.ts';
import { invalid, validAlertBody } from './schemas.ts';

const RULES = 'alert_rules';
/** A tenant's rules; past it, creating one answers 409. */
export const MAX_RULES_PER_TENANT = 100;

/** What a client sets; the rest (id, tenant, times) the store gives. */
export type RuleFields = Omit<AlertRule, 'id' | 'tenantId' | 'createdAt' | 'updatedAt'>;

/** The fields every reader relies on; a stored value without them (hand-edited, older) is passed over. */
const isStoredRule = recordOf<AlertRule>({
  id: 'string', tenantId: 'string', name: 'string', condition: 'object', comparator: 'string', threshold: 'number',
  windowSeconds: 'number', forSeconds: 'number', noData: 'string', labels: 'object', repeatSeconds: 'number', enabled: 'boolean',
});

const notFound = () => new ApiError(404, 'Alert rule not found');

/** A rule's fields from a request body (defaults filled in), or ApiError 400 naming the field. */
export function validateRuleFields(body: unknown): RuleFields {
  const fields = validAlertBody<RuleFields>('Rule', body);
  // Reminders more often than every 5 minutes would be a flood; 0 turns them off.
  if (fields.repeatSeconds !== 0 && fields.repeatSeconds < 300) throw invalid('repeatSeconds', 'must be 0 (never) or from 300 to 604800');
  return fields;
}

export class AlertRules {
  private readonly ledger: CapLedger;

  constructor(private readonly state: StateStore, private readonly now: () => number = Date.now) {
    this.ledger = new CapLedger(state, now);
  }

  /** The tenant's rules, by name. */
  async list(tenantId: string): Promise<AlertRule[]> {
    return (await this.all()).filter((rule) => rule.tenantId === tenantId).sort((a, b) => a.name.localeCompare(b.name));
  }

  async get(tenantId: string, id: string): Promise<AlertRule> {
    const stored = await this.state.get<unknown>(RULES, id);
    if (!isStoredRule(stored) || stored.tenantId !== tenantId) throw notFound();
    return stored;
  }

  /** Refused with 409 past MAX_RULES_PER_TENANT. */
  async create(tenantId: string, fields: RuleFields): Promise<AlertRule> {
    const now = this.now();
    // Checked again here, so no caller can store a rule the evaluator would misread.
    const rule: AlertRule = { ...validateRuleFields(fields), id: `alr_${randomBytes(8).toString('hex')}`, tenantId, createdAt: now, updatedAt: now };
    await this.ledger.claim(`alert_rules/${tenantId}`, rule.id, {
      cap: MAX_RULES_PER_TENANT,
      members: async () => new Map((await this.list(tenantId)).map((r) => [r.id, { ended: false }])),
      refuse: (cap) => new ApiError(409, `A tenant keeps at most ${cap} alert rules: remove one first`),
    });
    await this.state.put(RULES, rule.id, rule);
    return rule;
  }

  /** Every field a client sets is replaced; the rule keeps its id, tenant, creation time and status. */
  async replace(tenantId: string, id: string, fields: RuleFields): Promise<AlertRule> {
    const valid = validateRuleFields(fields);
    for (;;) {
      const current = await this.state.getVersioned<unknown>(RULES, id);
      if (!current || !isStoredRule(current.value) || current.value.tenantId !== tenantId) throw notFound();
      const { createdAt } = current.value;
      const next: AlertRule = { ...valid, id, tenantId, createdAt, updatedAt: this.now() };
      if ((await this.state.update(RULES, id, next, current.revision)) !== undefined) return next;
    }
  }

  async remove(tenantId: string, id: string): Promise<void> {
    await this.get(tenantId, id);
    await this.state.delete(RULES, id);
  }

  /** Every tenant's rules, for the evaluator. */
  async all(): Promise<AlertRule[]> {
    return (await this.state.list<unknown>(RULES)).map(([, rule]) => rule).filter(isStoredRule);
  }
}
