/**
 * The console API's routes past sign-in: sources and their keys, the reads, dashboards, the
 * development inbox, alerts. Each
 * works on the caller's tenant only (console/http.ts admits the call and gives its session).
 */
import { validateRuleFields, validateSilenceFields, type AlertRule, type AlertStatus } from '../alerts/index.ts';
import { ApiError } from '../core/errors.ts';
import type { ApiKeyRecord, Source } from '../gateway/sources.ts';
import type { InstallTokenView, IssuedKeyView, SourceView } from './api.ts';
import type { Call, ConsoleHttpDeps, Route } from './route.ts';
import { validBody } from './schemas.ts';

const ms = (iso: string) => Date.parse(iso);

function sourceView(source: Source & { keys: Array<Omit<ApiKeyRecord, 'hash'>> }): SourceView {
  return {
    id: source.id,
    name: source.name,
    createdAt: ms(source.createdAt),
    keys: source.keys.map((key) => ({
      id: key.id,
      createdAt: ms(key.createdAt),
      ...(key.label ? { label: key.label } : {}),
      ...(key.revokedAt ? { revokedAt: ms(key.revokedAt) } : {}),
    })),
  };
}

export function sourceRoutes(deps: ConsoleHttpDeps): Route[] {
  const { sources } = deps;
  /** The tenant's source by id, with its keys; 404 for anyone else's. */
  const ownSource = async (call: Call) => {
    const found = (await sources.listSources(call.session.tenant.id)).find((source) => source.id === call.params.id);
    if (!found) throw new ApiError(404, 'Source not found');
    return found;
  };
  return [
    { method: 'GET', pattern: '/api/sources', access: 'read', run: async (call) => ({ sources: (await sources.listSources(call.session.tenant.id)).map(sourceView) }) },
    { method: 'POST', pattern: '/api/sources', access: 'configure', status: 201, run: async (call) => {
      const { name } = validBody<{ name: string }>('CreateSource', call.body);
      const created = await sources.createSource(name.trim(), call.session.tenant.id);
      const source = (await sources.listSources(call.session.tenant.id)).find((s) => s.id === created.id)!;
      const key: IssuedKeyView = { sourceId: created.id, keyId: created.keyId, apiKey: created.apiKey };
      return { source: sourceView(source), key };
    } },
    { method: 'POST', pattern: '/api/sources/:id/keys', access: 'configure', status: 201, run: async (call) => {
      const { revokeKeyId } = validBody<{ revokeKeyId?: string }>('AddKey', call.body);
      const source = await ownSource(call);
      if (revokeKeyId !== undefined && !source.keys.some((key) => key.id === revokeKeyId)) throw new ApiError(404, 'API key not found');
      // Rotation: the new key exists before the old one stops working (and is not refused at the key cap).
      const issued = await sources.addKey(source.id, revokeKeyId === undefined ? {} : { replacing: revokeKeyId });
      if (revokeKeyId !== undefined) await sources.revokeKey(revokeKeyId);
      const view: IssuedKeyView = { sourceId: source.id, keyId: issued.keyId, apiKey: issued.apiKey };
      return view;
    } },
    { method: 'POST', pattern: '/api/sources/:id/keys/:keyId/revoke', access: 'configure', run: async (call) => {
      const source = await ownSource(call);
      if (!source.keys.some((key) => key.id === call.params.keyId)) throw new ApiError(404, 'API key not found');
      const revoked = await sources.revokeKey(call.params.keyId!);
      return { id: revoked.id, createdAt: ms(revoked.createdAt), revokedAt: ms(revoked.revokedAt!) };
    } },
    { method: 'POST', pattern: '/api/sources/:id/install-tokens', access: 'configure', status: 201, run: async (call) => {
      const source = await ownSource(call);
      const issued = await deps.installTokens.create(source.id);
      const view: InstallTokenView = {
        token: issued.token,
        expiresAt: ms(issued.expiresAt),
        command: `curl -fsS ${deps.ingest().otlpHttp}/install/${issued.token} | kubectl apply -f -`,
      };
      return view;
    } },
    { method: 'GET', pattern: '/api/agents', access: 'read', run: async (call) => {
      const sources = await call.sourceIds();
      return { agents: await deps.readGate.run(call.session.tenant.id, () => deps.reads.agents(sources)) };
    } },
  ];
}

export function queryRoutes(deps: ConsoleHttpDeps): Route[] {
  const { reads, readGate } = deps;
  // The body goes to the read as it came: each read checks its query first (400 naming the field).
  // Reads take turns (read-gate.ts): a few at once in the process, a few per tenant.
  const query = (pattern: string, run: (sources: readonly string[], body: never) => Promise<unknown>): Route => ({
    method: 'POST', pattern: `/api/query/${pattern}`, access: 'read',
    run: async (call) => {
      const sources = await call.sourceIds();
      return readGate.run(call.session.tenant.id, () => run(sources, (call.body ?? {}) as never));
    },
  });
  return [
    query('overview', (sources, body) => reads.overview(sources, body)),
    query('services', async (sources, body) => ({ services: await reads.services(sources, body) })),
    query('service-health', (sources, body) => reads.servicesHealth(sources, body)),
    query('service-operations', (sources, body) => reads.serviceOperations(sources, body)),
    query('logs', (sources, body) => reads.logs(sources, body)),
    query('log-summary', (sources, body) => reads.logSummary(sources, body)),
    query('traces', async (sources, body) => ({ traces: await reads.traces(sources, body) })),
    query('metric-names', async (sources, body) => ({ metrics: await reads.metricNames(sources, body) })),
    query('metrics', (sources, body) => reads.metric(sources, body)),
    query('deploys', async (sources, body) => ({ deploys: await reads.deploys(sources, body) })),
    query('deploy-verdicts', async (sources, body) => ({ verdicts: await reads.deployVerdicts(sources, body) })),
    { method: 'GET', pattern: '/api/traces/:traceId', access: 'read', run: async (call) => {
      const sources = await call.sourceIds();
      const traceId = call.params.traceId!.toLowerCase();
      const trace = /^[0-9a-f]{32}$/.test(traceId) ? await readGate.run(call.session.tenant.id, () => reads.trace(sources, traceId)) : undefined;
      if (!trace) throw new ApiError(404, 'Trace not found');
      return trace;
    } },
  ];
}

export function dashboardRoutes({ dashboards }: ConsoleHttpDeps): Route[] {
  type Fields = Parameters<typeof dashboards.create>[1];
  const tenant = (call: Call) => call.session.tenant.id;
  return [
    { method: 'GET', pattern: '/api/dashboards', access: 'read', run: async (call) => ({ dashboards: await dashboards.list(tenant(call)) }) },
    { method: 'POST', pattern: '/api/dashboards', access: 'configure', status: 201, run: (call) => dashboards.create(tenant(call), validBody<Fields>('Dashboard', call.body)) },
    { method: 'GET', pattern: '/api/dashboards/:id', access: 'read', run: (call) => dashboards.get(tenant(call), call.params.id!) },
    { method: 'PUT', pattern: '/api/dashboards/:id', access: 'configure', run: (call) => dashboards.replace(tenant(call), call.params.id!, validBody<Fields>('Dashboard', call.body)) },
    { method: 'DELETE', pattern: '/api/dashboards/:id', access: 'configure', status: 204, run: (call) => dashboards.remove(tenant(call), call.params.id!) },
  ];
}

/** How many inbox messages the page shows. */
const INBOX_PAGE = 100;

export function inboxRoutes({ inbox }: ConsoleHttpDeps): Route[] {
  return [
    { method: 'GET', pattern: '/api/inbox', access: 'read', run: async (call) => {
      if (!inbox) throw new ApiError(404, 'The development inbox is off (SLUICE_DELIVERY_INBOX)');
      return { messages: await inbox.list({ tenantId: call.session.tenant.id, limit: INBOX_PAGE }) };
    } },
  ];
}

/**
 * Alert rules and silences of the caller's tenant, each rule with its state and history. A rule
 * names a relay form of the tenant to notify (contact points); 404 when the relay does not run.
 */
export function alertRoutes({ alerts }: ConsoleHttpDeps): Route[] {
  const on = (): NonNullable<ConsoleHttpDeps['alerts']> => {
    if (!alerts) throw new ApiError(404, 'Alerts need the relay, which delivers their notifications: it is off here');
    return alerts;
  };
  const tenant = (call: Call) => call.session.tenant.id;
  /** The rule's fields, its `notify` one of the tenant's contact points (else 400, never another tenant's form). */
  const validFields = (call: Call) => {
    const fields = validateRuleFields(call.body);
    const { notify } = fields;
    if (notify && !on().contactPoints(tenant(call)).some((point) => point.siteId === notify.siteId && point.formId === notify.formId)) {
      throw new ApiError(400, 'Validation failed: notify must name an active form of one of your sites (GET /api/alerts/contact-points)', { field: 'notify' });
    }
    return fields;
  };
  const withStatus = async (rule: AlertRule) => ({ rule, status: (await on().evaluator.status(rule.tenantId, rule.id)) ?? null });
  return [
    { method: 'GET', pattern: '/api/alerts/contact-points', access: 'read', run: async (call) => ({ contactPoints: on().contactPoints(tenant(call)) }) },
    { method: 'GET', pattern: '/api/alerts/rules', access: 'read', run: async (call) => {
      // One read per rule of the tenant (at most 100), never a scan of every tenant's statuses.
      const rules = await on().rules.list(tenant(call));
      const statuses = await Promise.all(rules.map((rule) => on().evaluator.status(rule.tenantId, rule.id)));
      // The list shows the state, not the history (GET one rule for it).
      return { rules: rules.map((rule, i) => ({ rule, status: summary(statuses[i]) })) };
    } },
    { method: 'POST', pattern: '/api/alerts/rules', access: 'configure', status: 201, run: async (call) => withStatus(await on().rules.create(tenant(call), validFields(call))) },
    { method: 'GET', pattern: '/api/alerts/rules/:id', access: 'read', run: async (call) => withStatus(await on().rules.get(tenant(call), call.params.id!)) },
    { method: 'PUT', pattern: '/api/alerts/rules/:id', access: 'configure', run: async (call) => withStatus(await on().rules.replace(tenant(call), call.params.id!, validFields(call))) },
    { method: 'DELETE', pattern: '/api/alerts/rules/:id', access: 'configure', status: 204, run: (call) => on().rules.remove(tenant(call), call.params.id!) },
    { method: 'GET', pattern: '/api/alerts/silences', access: 'read', run: async (call) => ({ silences: await on().silences.list(tenant(call)) }) },
    { method: 'POST', pattern: '/api/alerts/silences', access: 'configure', status: 201, run: (call) =>
      on().silences.create(tenant(call), call.session.user.email, validateSilenceFields(call.body, Date.now())) },
    { method: 'DELETE', pattern: '/api/alerts/silences/:id', access: 'configure', status: 204, run: (call) => on().silences.expire(tenant(call), call.params.id!) },
  ];
}

/** A rule's state without its history and evaluations. */
function summary(status: AlertStatus | undefined) {
  if (!status) return null;
  const { history: _history, samples: _samples, ...rest } = status;
  return rest;
}
