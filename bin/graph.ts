/** One shutdown step; `deadline` (epoch ms) is when the whole shutdown should be over. */
export type Stop = (deadline: number) => Promise<void>;

/** Time a server gives requests in flight at shutdown: half of what is left, the rest goes to flushing. */
export function serverGraceMs(deadline: number): number {
  return Number.isFinite(deadline) ? Math.max(0, (deadline - Date.now()) / 2) : 0;
}

/**
 * The component graph of one Sluice process: every part built once, on first use, from the
 * validated config (drivers chosen in components.ts), and stopped in reverse order of building.
 * The roles (app.ts) and the CLI's admin commands (cli.ts) take what they need from it, so one
 * place knows how the parts depend on each other. Every long-lived part registers with
 * readiness here; every loop runs under the graph's supervisor.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Bus } from '../bus/bus.ts';
import type { SluiceConfig } from '../core/config.ts';
import type { MemoryPlan } from '../core/memory-budget.ts';
import type { MemoryGuard } from '../core/memory-guard.ts';
import { descriptorStatus } from '../core/descriptors.ts';
import type { Logger } from '../core/log.ts';
import { SluiceMetrics } from '../core/metrics.ts';
import { Readiness } from '../core/readiness.ts';
import { Supervisor } from '../core/supervisor.ts';
import { AgentConfigs } from '../gateway/agent-configs.ts';
import { InstallTokens } from '../gateway/install-tokens.ts';
import type { ClientLimiter } from '../gateway/client-ip.ts';
import type { SignInLockout } from '../gateway/sign-in-lockout.ts';
import { SourceRegistry } from '../gateway/sources.ts';
import { AccountStore } from '../accounts/store.ts';
import { TenantUsers } from '../accounts/tenant-users.ts';
import { AlertEvaluator, AlertRules, Lease, Silences, type AlertEvaluatorDeps } from '../alerts/index.ts';
import { alertMeasure } from '../console/alert-measure.ts';
import { openConsole, type Console, type ConsoleParts } from '../console/index.ts';
import type { ConsoleReads } from '../console/reads.ts';
import type { ContactPoint } from '../console/api.ts';
import type { ConsoleAlerts, RelayConsole } from '../console/route.ts';
import { DEFAULT_READ_LIMITS, ReadGate } from '../core/read-gate.ts';
import { ConsoleQueries } from '../console/queries/index.ts';
import { buildConsoleAssets } from '../console/ui/build.ts';
import { ClickhouseReader } from '../storage/clickhouse-reader.ts';
import { IngestTally } from '../pipeline/ingest-tally.ts';
import type { Fallback } from '../pipeline/wasm/transcoder.ts';
import { openRelay, type Relay } from '../relay/index.ts';
import { RelayJobResolver } from '../relay/delivery-resolver.ts';
import { RenderPool } from '../relay/render-pool.ts';
import { MessageRenderer } from '../relay/renderer.ts';
import { AttemptLog } from '../delivery/attempt-log.ts';
import { EmailSender } from '../delivery/email.ts';
import type { DeliveryJob } from '../delivery/job.ts';
import type { DeliveryQueue } from '../delivery/queue.ts';
import { RetryPolicy } from '../delivery/retry-policy.ts';
import { WebhookSender } from '../delivery/webhook.ts';
import { WhatsAppSender } from '../delivery/whatsapp.ts';
import { DevelopmentInbox } from '../delivery/inbox.ts';
import { DeliveryWorker, sendingDispatch, type Dispatch } from '../delivery/worker.ts';
import type { StateStore } from '../state/store.ts';
import { readsAfter, type Storage } from '../storage/storage.ts';
import type { StatementRunner } from '../storage/chdb-reader.ts';
import { ChdbReadThreads } from '../storage/chdb-read-threads.ts';
import { chdbEngineDir } from '../storage/chdb.ts';
import { engineArgs } from '../storage/chdb-engine.ts';
import { LocalAdmin } from './admin.ts';
import {
  announceStorage,
  connectNats,
  createBus,
  createLimiter,
  createSignInLockout,
  createStateStore,
  createDeliveryQueue,
  createStorage,
  deliveryDefaults,
  LIMITER_KEYS,
  limitRule,
  type LimiterKind,
  masterKey,
  relayParts,
  schemaOptions,
  storageStatus,
  watchNatsConnection,
  tenantEgressPolicy,
} from './components.ts';
import { lockDataDir } from './lock.ts';

/** What the relay gives alert rules (relay/index.ts relayAlerts). */
export interface RelayAlertParts {
  notify: AlertEvaluatorDeps['notify'];
  contactPoints(tenantId: string): ContactPoint[];
}

/** What the relay gives the console where both run: alert rules' notifications, its admin API as the console's user, its public URL. */
export interface RelayConsoleParts extends RelayConsole {
  alerts: RelayAlertParts;
}

export class SluiceGraph {
  readonly metrics = new SluiceMetrics();
  readonly readiness = new Readiness();
  readonly supervisor: Supervisor;
  private readonly built = new Map<string, Promise<unknown>>();
  private readonly stops: Array<{ name: string; stop: Stop }> = [];
  /** The shutdown step under way, for the log line when a shutdown runs out of time. */
  stopping: string | undefined;

  /**
   * @param ownsStorage whether this process stores rows itself (serve, consume, the CLI); a
   *   cluster gateway does not, and reads storage only for the relay's listings.
   * @param memory the memory budget's split and its guard (the roles, app.ts); the CLI's
   *   commands run without (chDB's own limits, no guard).
   */
  constructor(
    readonly config: Readonly<SluiceConfig>,
    readonly log: Logger,
    private readonly ownsStorage = true,
    readonly memory: { plan: MemoryPlan; guard: MemoryGuard | undefined } | undefined = undefined,
  ) {
    this.supervisor = new Supervisor({ log, onRestart: (loop) => this.metrics.loopRestarts.inc({ loop }) });
    this.onStop('supervisor', () => this.supervisor.stop());
    this.readiness.register('descriptors', () => descriptorStatus());
    this.metrics.readinessSource = async () => (await this.readiness.report()).components;
  }

  /** Adds a stop to run at shutdown (servers the roles start themselves). */
  onStop(name: string, stop: Stop): void {
    this.stops.push({ name, stop });
  }

  /**
   * Stops everything built, newest first; a failing stop is logged and the rest go on. Each
   * stop is given the deadline (epoch ms) by which the whole shutdown should be over.
   */
  async shutdown(deadline = Infinity): Promise<void> {
    for (const { name, stop } of this.stops.splice(0).reverse()) {
      this.stopping = name;
      await stop(deadline).catch((err) => this.log.error({ err, part: name }, 'shutdown step failed'));
    }
    this.stopping = undefined;
  }

  /** One process owns the data dir (chDB, the local state store, the control socket). */
  lockDataDir(): Promise<void> {
    return this.once('data dir lock', async () => {
      this.onStop('data dir lock', await lockDataDir(this.config.dataDir, this.log));
    });
  }

  /** The NATS connection of cluster mode; undefined on the embedded default. */
  nats(): Promise<NatsConnection | undefined> {
    return this.once('nats', async () => {
      const nc = await connectNats(this.config, this.log);
      if (!nc) return undefined;
      this.onStop('nats', () => nc.drain());
      this.readiness.register('nats', watchNatsConnection(nc, this.supervisor, this.log));
      return nc;
    });
  }

  state(): Promise<StateStore> {
    return this.once('state', async () => {
      const state = createStateStore(this.config, await this.nats(), this.log);
      await state.start();
      this.onStop('state', () => state.shutdown());
      return state;
    });
  }

  /** Tenants and users (accounts/), shared by the relay and the console. */
  accounts(): Promise<AccountStore> {
    return this.once('accounts', async () => {
      const accounts = new AccountStore(await this.state(), this.log);
      await accounts.start();
      this.onStop('accounts', async () => accounts.shutdown());
      for (const bucket of Object.keys(accounts.statuses())) {
        this.readiness.register(`state.${bucket}`, () => accounts.statuses()[bucket] ?? { ok: false, detail: 'gone' });
      }
      return accounts;
    });
  }

  sources(): Promise<SourceRegistry> {
    return this.once('sources', async () => {
      const sources = new SourceRegistry(await this.state(), this.log);
      await sources.start();
      // Sources made before they had tenants move to the default tenant, once.
      if (await sources.hasUntenanted()) {
        const moved = await sources.moveUntenanted((await (await this.accounts()).defaultTenant()).id);
        this.log.info({ moved }, 'sources without a tenant moved to the default tenant');
      }
      this.onStop('sources', () => sources.shutdown());
      this.readiness.register('state.api_keys', () => sources.status());
      return sources;
    });
  }

  configs(): Promise<AgentConfigs> {
    return this.once('agent configs', async () => {
      const configs = new AgentConfigs(await this.state(), this.log);
      await configs.start();
      this.onStop('agent configs', () => configs.shutdown());
      this.readiness.register('state.agent_configs', () => configs.status());
      return configs;
    });
  }

  installTokens(): Promise<InstallTokens> {
    return this.once('install tokens', async () => new InstallTokens(await this.state(), await this.sources()));
  }

  /**
   * Storage. `migrate`: bring the schema up to date at start (the embedded engine always does;
   * on a server only `sluice serve` and `sluice migrate`, so cluster consumers do not race).
   */
  storage(migrate = false): Promise<Storage> {
    return this.once('storage', async () => {
      const storage = createStorage(this.config, { migrateOnStart: migrate, chdbLimits: this.memory?.plan.chdb });
      await storage.start();
      this.onStop('storage', () => storage.shutdown());
      announceStorage(storage, this.log);
      this.readiness.register('storage', () => storageStatus(storage));
      // Embedded: rows are acknowledged once in the local log; a read waits for those before it.
      if (this.config.nats.url) return storage;
      return readsAfter(storage, async () => {
        if (this.built.has('bus')) await (await this.bus()).settled?.();
      });
    });
  }

  /**
   * Storage for reading (the relay's submission listings): the process's own; on a cluster
   * gateway a ClickHouse connection of its own when CLICKHOUSE_URL is set (not in readiness:
   * ingestion does not need it), else none.
   */
  storageReader(): Promise<Storage | undefined> {
    if (this.ownsStorage) return this.storage();
    return this.once('storage reader', async () => {
      if (!this.config.clickhouse.url) return undefined;
      const storage = createStorage(this.config, { migrateOnStart: false });
      await storage.start();
      this.onStop('storage reader', () => storage.shutdown());
      return storage;
    });
  }

  /**
   * Read connections to the embedded engine, for the query endpoint and the console, on threads
   * of their own (storage/chdb-read-threads.ts): opened after storage (the
   * engine and its schema are there), closed before it. They do not wait for the local log:
   * a dashboard's reads are not held up to a flush interval.
   */
  chdbReader(): Promise<ChdbReadThreads> {
    return this.once('chdb reader', async () => {
      if (this.config.clickhouse.url || this.config.nats.url) throw new Error('the chDB reader needs the embedded engine');
      await this.storage();
      // A thread for each statement the gates in front of it let run at once: the query
      // endpoint's (query/gate.ts), where it is on, and the console's and the relay's listings' (core/read-gate.ts).
      const threads = (this.config.query.port > 0 ? this.config.query.maxConcurrent : 0) + DEFAULT_READ_LIMITS.running;
      const engineDir = chdbEngineDir(this.config.dataDir);
      const reader = new ChdbReadThreads(engineDir, threads, engineArgs(engineDir, this.memory?.plan.chdb));
      await reader.start();
      this.onStop('chdb reader', () => reader.shutdown());
      this.readiness.register('chdb read threads', () => reader.status());
      return reader;
    });
  }

  bus(): Promise<Bus> {
    return this.once('bus', async () => {
      const memory = this.memory && { insertBatchBytes: this.memory.plan.insertBatchBytes, guard: this.memory.guard };
      const bus = createBus(this.config, await this.nats(), this.log, (loop) => this.metrics.loopRestarts.inc({ loop }), memory);
      await bus.start();
      this.onStop('bus', (deadline) => bus.shutdown(deadline));
      this.metrics.busSource = () => bus.figures();
      return bus;
    });
  }

  /**
   * The front ends' per-source counts (serve, gateway), written to ingest_counts through the bus
   * every 10 s by a supervised loop (restarts counted in sluice_loop_restarts_total; not in
   * readiness: ingestion does not need it). Built after the bus and stopped before it: the last
   * counts are flushed once the front ends have stopped.
   */
  ingestTally(): Promise<IngestTally> {
    return this.once('ingest tally', async () => {
      const tally = new IngestTally({ bus: await this.bus(), log: this.log, onDropped: (rows) => this.metrics.ingestCountsDropped.inc(rows) });
      this.supervisor.run('ingest tally', (context) => tally.run(context));
      this.onStop('ingest tally', () => tally.shutdown());
      return tally;
    });
  }

  /** Shows the bus and its consumer loops in readiness (after consume(), which adds the loops). */
  registerBus(bus: Bus): void {
    for (const name of Object.keys(bus.statuses())) this.readiness.register(name, () => bus.statuses()[name] ?? { ok: false, detail: 'gone' });
  }

  /**
   * A per-client-IP limiter (shared through Redis when configured), by the rules of
   * components.ts#limitRule, keyed by the client's network (IPv6: SLUICE_IPV6_LIMIT_PREFIX).
   */
  limiter(kind: LimiterKind): Promise<ClientLimiter> {
    return this.once(`${kind} limiter`, async () => {
      const limiter = await createLimiter(this.config, this.log, limitRule(this.config, kind), `sluice:${this.config.nats.prefix}:${LIMITER_KEYS[kind]}:`);
      this.onStop(`${kind} limiter`, () => limiter.shutdown());
      return limiter;
    });
  }

  /** Sign-in attempts per account, for the console and the relay alike (shared through Redis when configured). */
  signInLockout(): Promise<SignInLockout> {
    return this.once('sign-in lockout', async () => {
      const lockout = await createSignInLockout(this.config, this.log, `sluice:${this.config.nats.prefix}:sign-in-lockout:`, () => this.metrics.signInLockedOut.inc());
      this.onStop('sign-in lockout', () => lockout.shutdown());
      return lockout;
    });
  }

  /** Where reads of storage for people (the console's, the relay's listings) take turns, per tenant and in the process. */
  readGate(): Promise<ReadGate> {
    return this.once('read gate', async () => new ReadGate());
  }

  /** The relay module (store mirrors and admin operations); its port is a role's business. */
  relay(): Promise<Relay> {
    return this.once('relay', async () => {
      // The new series is recorded once it is on the queue: a refused enqueue leaves the job dead, to retry again.
      const requeue = async (job: DeliveryJob) => {
        await (await this.deliveryQueue()).enqueue([job]);
        await (await this.attemptLog()).record(job, 0, 'queued');
      };
      const parts = await relayParts(this.config, await this.state(), await this.accounts(), () => this.storageReader(), requeue, this.log);
      const inbox = await this.deliveryInbox();
      const relay = await openRelay({
        ...parts, ...(inbox ? { inbox } : {}), renderer: new MessageRenderer(await this.renderPool()), signInLockout: () => this.signInLockout(), readGate: await this.readGate(),
      });
      this.onStop('relay', async () => relay.shutdown());
      for (const bucket of Object.keys(relay.store.statuses())) {
        this.readiness.register(`state.${bucket}`, () => relay.store.statuses()[bucket] ?? { ok: false, detail: 'gone' });
      }
      return relay;
    });
  }

  /** What a worker pool calls when one of its threads reached its heap limit: a log line and a count. */
  workerOutOfMemory(pool: string): () => void {
    return () => {
      this.metrics.workerOutOfMemory.inc({ pool });
      this.log.error({ pool, heapLimitMb: this.config.pipeline.workerHeapMb }, 'a worker thread reached its heap limit (SLUICE_WORKER_HEAP_MB) and was replaced; the requests it held got 503');
    };
  }

  /** What the worker pool calls for a request the WebAssembly transcoder could not serve (the JavaScript one did): a count and a log line. */
  transcoderFallback(): (fallback: Fallback) => void {
    return ({ fallback, detail }) => {
      this.metrics.transcoderFallbacks.inc({ reason: fallback });
      const message = 'the WebAssembly transcoder could not serve a request; the JavaScript transcoder did';
      if (fallback === 'trap') this.log.error({ reason: fallback, detail }, `${message} (a bug in the module; its instance was replaced)`);
      else this.log.warn({ reason: fallback, detail }, message);
    };
  }

  /**
   * The worker threads that render large relay messages, for previews and deliveries: started by
   * the delivery worker (serve, deliver), elsewhere on first use. Stopped after the relay's users.
   */
  renderPool(): Promise<RenderPool> {
    return this.once('render pool', async () => {
      const pool = new RenderPool({ maxHeapMb: this.config.pipeline.workerHeapMb, onOutOfMemory: this.workerOutOfMemory('render pool') });
      this.onStop('render pool', () => pool.shutdown());
      this.readiness.register('render pool', () => pool.status());
      return pool;
    });
  }

  /**
   * The web console's module (its port is the role's business): storage reads on the embedded
   * engine's read connections, or on the ClickHouse server of CLICKHOUSE_URL in a cluster.
   */
  console(front: Pick<ConsoleParts, 'clientIp' | 'budget' | 'ingest'>, relay?: RelayConsoleParts): Promise<Console> {
    return this.once('console', async () => {
      let runner: StatementRunner;
      if (this.config.clickhouse.url) {
        const reader = new ClickhouseReader({ url: this.config.clickhouse.url });
        this.onStop('console reads', () => reader.shutdown());
        runner = reader;
      } else {
        runner = await this.chdbReader();
      }
      const inbox = await this.deliveryInbox();
      const reads = new ConsoleQueries(runner, this.config.storage.database);
      const readGate = await this.readGate();
      const alerts = relay && (await this.alerts(reads, readGate, relay.alerts));
      return openConsole({
        ...front,
        ...(inbox ? { inbox } : {}),
        ...(alerts ? { alerts } : {}),
        ...(relay ? { relay: { admin: relay.admin, url: relay.url } } : {}),
        readGate,
        accounts: await this.accounts(),
        users: await this.tenantUsers(),
        state: await this.state(),
        masterKey: await masterKey(this.config, 'the console'),
        sources: await this.sources(),
        installTokens: await this.installTokens(),
        reads,
        assets: await buildConsoleAssets(),
        signInLimiter: await this.limiter('sign-in'),
        signInLockout: await this.signInLockout(),
        log: this.log,
        publicUrl: this.config.console.publicUrl,
      });
    });
  }

  /** The tenant users' invitations, mirrored from the state store. */
  private tenantUsers(): Promise<TenantUsers> {
    return this.once('tenant users', async () => {
      const users = new TenantUsers(await this.accounts(), await this.state(), this.log);
      await users.start();
      this.onStop('tenant users', async () => users.stop());
      return users;
    });
  }

  /**
   * Alert rules and their evaluator: measured through the console's reads and read gate, notified
   * through the relay. Every process that serves both runs an evaluator; the lease lets one work at a time.
   */
  private async alerts(reads: ConsoleReads, readGate: ReadGate, relay: RelayAlertParts): Promise<ConsoleAlerts> {
    const state = await this.state();
    const sources = await this.sources();
    const rules = new AlertRules(state);
    const silences = new Silences(state);
    const intervalMs = this.config.alerts.intervalSeconds * 1000;
    const holder = `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
    const evaluator = new AlertEvaluator({
      rules,
      silences,
      state,
      lease: new Lease(state, 'alert evaluator', holder, 3 * intervalMs),
      measure: alertMeasure(reads, readGate, (tenantId) => sources.sourceIdsOf(tenantId)),
      notify: relay.notify,
      log: this.log,
      intervalMs,
      onRestart: (loop) => this.metrics.loopRestarts.inc({ loop }),
    });
    evaluator.start();
    this.onStop('alert evaluator', () => evaluator.stop());
    this.readiness.register('alerts', () => evaluator.loopStatus());
    return { rules, silences, evaluator, contactPoints: relay.contactPoints };
  }

  /** The delivery queue (jobs are enqueued by the relay's intake and its manual retries). */
  deliveryQueue(): Promise<DeliveryQueue> {
    return this.once('delivery queue', async () => {
      await this.bus(); // built first, stopped after: the last attempts still record their outcome
      const queue = createDeliveryQueue(this.config, await this.nats(), await this.state(), this.supervisor, this.log);
      await queue.start();
      this.onStop('delivery queue', () => queue.shutdown());
      for (const name of Object.keys(queue.statuses())) this.readiness.register(name, () => queue.statuses()[name] ?? { ok: false, detail: 'gone' });
      return queue;
    });
  }

  /** The delivery history's writer: one per process, so its count of records lost is the process's. */
  attemptLog(): Promise<AttemptLog> {
    return this.once('attempt log', async () => new AttemptLog(await this.bus(), this.log));
  }

  /** Delivery workers in this process (`serve`, `deliver`): they take jobs from the queue until shutdown. */
  deliveryWorker(): Promise<void> {
    return this.once('delivery worker', async () => {
      const relay = await this.relay();
      await (await this.renderPool()).start();
      const queue = await this.deliveryQueue();
      const history = await this.attemptLog();
      const inbox = await this.deliveryInbox();
      let dispatch: Dispatch;
      let closeSenders = async () => {};
      if (inbox) {
        dispatch = inbox;
        this.log.warn('DEVELOPMENT INBOX (SLUICE_DELIVERY_INBOX=true): no email, WhatsApp message or webhook is sent; each is kept for `sluice relay inbox list`, GET /api/v1/admin/inbox and the console\'s Inbox page, and its attempt recorded as delivered. Never in production.');
      } else {
        // One policy for every connection a tenant aims: its webhooks and its own SMTP server.
        const egress = tenantEgressPolicy(this.config);
        const email = new EmailSender({ egress, log: this.log });
        dispatch = sendingDispatch({
          email,
          whatsapp: new WhatsAppSender(),
          webhook: new WebhookSender({ egress, timeoutMs: this.config.delivery.webhookTimeoutMs }),
        });
        closeSenders = () => email.close();
      }
      const { metrics } = this;
      const worker = new DeliveryWorker({
        queue,
        resolver: new RelayJobResolver(relay.store, relay.secrets, { ...(await deliveryDefaults(this.config)), inbox: inbox !== undefined }, relay.renderer),
        dispatch,
        policy: new RetryPolicy({ attempts: this.config.delivery.attempts, baseDelayMs: this.config.delivery.backoffBaseMs, maxDelayMs: this.config.delivery.backoffMaxMs }),
        history,
        counters: {
          attempt(channel, outcome, seconds) {
            metrics.deliveryAttempts.inc({ channel, outcome });
            metrics.deliverySeconds.observe({ channel, outcome }, seconds);
          },
        },
        log: this.log,
      });
      metrics.deliverySource = async () => ({ depth: await queue.depth(), historyLost: history.lost });
      worker.start(this.config.delivery.concurrency);
      this.onStop('delivery worker', async () => {
        await queue.shutdown(); // the attempts under way finish first
        await closeSenders();
      });
    });
  }

  /**
   * The development inbox (SLUICE_DELIVERY_INBOX, embedded only): the delivery worker keeps every
   * message in it instead of sending; the relay's admin and the console read it. Undefined when off.
   */
  deliveryInbox(): Promise<DevelopmentInbox | undefined> {
    return this.once('delivery inbox', async () => {
      if (!this.config.delivery.inbox) return undefined;
      const inbox = new DevelopmentInbox({ state: await this.state(), onKept: (channel) => this.metrics.deliveryInboxMessages.inc({ channel }) });
      // Ready, and saying so wherever readiness is read: nothing leaves this process.
      this.readiness.register('delivery.inbox', () => ({ ok: true, detail: 'development inbox on (SLUICE_DELIVERY_INBOX): nothing is sent' }));
      return inbox;
    });
  }

  /** The admin operations of the CLI: in this process, or for the control socket of a server. */
  async admin(publicUrl: string, storage: () => Promise<Storage> = () => this.storage()): Promise<LocalAdmin> {
    return new LocalAdmin({
      sources: await this.sources(),
      configs: await this.configs(),
      installTokens: await this.installTokens(),
      storage,
      database: this.config.storage.database,
      schema: schemaOptions(this.config),
      publicUrl,
      accounts: () => this.accounts(),
      relay: () => this.relay(),
    });
  }

  /** Builds a part once; concurrent callers share the same promise, and a failure is not cached. */
  private once<T>(name: string, build: () => Promise<T>): Promise<T> {
    let part = this.built.get(name) as Promise<T> | undefined;
    if (!part) {
      part = build();
      this.built.set(name, part);
      part.catch(() => this.built.delete(name));
    }
    return part;
  }
}
