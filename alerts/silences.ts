/**
 * Silences: a tenant holds back the notifications of some rules for a while (a maintenance, a
 * known incident) without editing them. A silence names a rule, or labels that a rule's labels
 * must all include, or both (then both must match); it ends at `endsAt`, at most 30 days away.
 * Transitions still happen and are recorded while silenced; only the notification is held.
 *
 * An ended silence matches nothing and is no longer listed; the store drops it once no silence
 * written with it could still be running (the bucket's expiry). The cap counts running silences
 * only: a place on the ledger frees itself when its silence ends.
 */
import { randomBytes } from 'node:crypto';
import { ApiError } from '../core/errors.ts';
import { CapLedger } from '../state/cap-ledger.ts';
import { recordOf } from '../state/shape.ts';
import type { StateStore } from '../state/store.ts';
import type { AlertRule, Silence } from './model.ts';
import { invalid, validAlertBody } from './schemas.ts';

const SILENCES = 'alert_silences';
/** A tenant's running silences; past it, creating one answers 409. */
export const MAX_SILENCES_PER_TENANT = 100;
/** How far away a silence may end. */
export const MAX_SILENCE_MS = 30 * 86_400_000;
/** A silence is dropped this long after its last write: by then it has ended, whatever its endsAt. */
const DROP_AFTER_MS = MAX_SILENCE_MS + 86_400_000;

/** What a client sets. */
export interface SilenceFields {
  ruleId?: string;
  labels?: Record<string, string>;
  endsAt: number;
  comment: string;
}

const isStoredSilence = recordOf<Silence>({ id: 'string', tenantId: 'string', ruleId: 'string?', labels: 'object?', endsAt: 'number', comment: 'string' });
const notFound = () => new ApiError(404, 'Silence not found');

/** A silence's fields from a request body at `now`, or ApiError 400 naming the field. */
export function validateSilenceFields(body: unknown, now: number): SilenceFields {
  const fields = validAlertBody<SilenceFields>('Silence', body);
  // Without a matcher a silence would hold back every rule of the tenant: say so rather than guess.
  if (fields.ruleId === undefined && Object.keys(fields.labels ?? {}).length === 0) throw invalid('ruleId', 'or labels is required: a silence names the rules it holds back');
  if (fields.endsAt <= now) throw invalid('endsAt', 'must be in the future');
  if (fields.endsAt > now + MAX_SILENCE_MS) throw invalid('endsAt', 'must be at most 30 days away');
  return fields;
}

/** Whether `silence` holds back `rule`'s notifications at `now`. */
export function silenceMatches(silence: Silence, rule: AlertRule, now: number): boolean {
  if (silence.tenantId !== rule.tenantId || silence.endsAt <= now) return false;
  if (silence.ruleId !== undefined && silence.ruleId !== rule.id) return false;
  return Object.entries(silence.labels ?? {}).every(([key, value]) => Object.hasOwn(rule.labels, key) && rule.labels[key] === value);
}

export class Silences {
  private readonly ledger: CapLedger;

  constructor(private readonly state: StateStore, private readonly now: () => number = Date.now) {
    state.expireAfter(SILENCES, DROP_AFTER_MS);
    this.ledger = new CapLedger(state, now);
  }

  /** The tenant's running silences, the soonest to end first. */
  async list(tenantId: string): Promise<Silence[]> {
    const now = this.now();
    return (await this.tenantSilences(tenantId)).filter((s) => s.endsAt > now).sort((a, b) => a.endsAt - b.endsAt);
  }

  /** `fields` are checked here (validateSilenceFields). Refused with 409 past MAX_SILENCES_PER_TENANT. */
  async create(tenantId: string, createdBy: string, fields: SilenceFields): Promise<Silence> {
    const now = this.now();
    const { ruleId, labels, endsAt, comment } = validateSilenceFields(fields, now);
    const silence: Silence = { id: `sil_${randomBytes(8).toString('hex')}`, tenantId, ...(ruleId ? { ruleId } : {}), ...(labels ? { labels } : {}), endsAt, comment, createdBy, createdAt: now };
    await this.ledger.claim(`alert_silences/${tenantId}`, silence.id, {
      cap: MAX_SILENCES_PER_TENANT,
      until: endsAt,
      members: async () => new Map((await this.tenantSilences(tenantId)).map((s) => [s.id, { ended: s.endsAt <= this.now(), until: s.endsAt }])),
      refuse: (cap) => new ApiError(409, `A tenant keeps at most ${cap} running silences: expire one first`),
    });
    await this.state.put(SILENCES, silence.id, silence);
    return silence;
  }

  /** Ends the silence now. Ending one that has already ended changes nothing. */
  async expire(tenantId: string, id: string): Promise<void> {
    for (;;) {
      const current = await this.state.getVersioned<unknown>(SILENCES, id);
      if (!current || !isStoredSilence(current.value) || current.value.tenantId !== tenantId) throw notFound();
      const now = this.now();
      if (current.value.endsAt <= now) return;
      if ((await this.state.update(SILENCES, id, { ...current.value, endsAt: now }, current.revision)) !== undefined) return;
    }
  }

  /** Whether a running silence holds back `rule`'s notifications at `now`. */
  async silences(rule: AlertRule, now: number): Promise<boolean> {
    return (await this.tenantSilences(rule.tenantId)).some((silence) => silenceMatches(silence, rule, now));
  }

  private async tenantSilences(tenantId: string): Promise<Silence[]> {
    return (await this.state.list<unknown>(SILENCES)).map(([, s]) => s).filter(isStoredSilence).filter((s) => s.tenantId === tenantId);
  }
}
