/** Creating and checking Sluice's work-queue streams: the bus's table streams and the delivery queue. */
import {
  AckPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../core/log.ts';

/** Stream settings that can be changed in place, as `sluice` wants them. */
export type Correctable = Pick<StreamConfig, 'subjects' | 'num_replicas' | 'max_bytes' | 'discard' | 'duplicate_window'>;

/** The duplicate window of every stream: a publish retried within it is stored once. */
export const DUPLICATE_WINDOW_NS = 120_000_000_000;

/** What Sluice wants of a work-queue stream: full means refuse (discard new), never drop. */
export function workQueueSettings(subject: string, replicas: number, maxBytes: number): Correctable {
  return { subjects: [subject], num_replicas: replicas, max_bytes: maxBytes, discard: DiscardPolicy.New, duplicate_window: DUPLICATE_WINDOW_NS };
}

/**
 * Creates a work-queue stream on file, or checks the one there is: settings that can change in
 * place (discard policy, size, replicas, subjects) are corrected with a warning; a stream with
 * another retention or storage cannot be, and this throws saying what to do. Idempotent.
 * Resolves true when this call created the stream.
 */
export async function ensureWorkQueueStream(jsm: JetStreamManager, stream: string, wanted: Correctable, log?: Logger): Promise<boolean> {
  const existing = await jsm.streams.info(stream).catch((err) => {
    if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) return undefined;
    throw err;
  });
  if (!existing) {
    return jsm.streams.add({ name: stream, retention: RetentionPolicy.Workqueue, storage: StorageType.File, ...wanted }).then(
      () => true,
      async (err) => {
        // Another process created it between our two calls.
        if (!(await jsm.streams.info(stream).catch(() => undefined))) throw err;
        return false;
      },
    );
  }
  const { retention, storage } = existing.config;
  if (retention !== RetentionPolicy.Workqueue || storage !== StorageType.File) {
    throw new Error(
      `JetStream stream ${stream} exists with retention ${retention} and storage ${storage}; Sluice needs workqueue on file, ` +
        'which cannot be changed in place: drain and delete the stream, or set another SLUICE_NATS_PREFIX',
    );
  }
  const actual = existing.config;
  const changed = (Object.keys(wanted) as Array<keyof Correctable>).filter((key) => JSON.stringify(actual[key]) !== JSON.stringify(wanted[key]));
  if (changed.length === 0) return false;
  await jsm.streams.update(stream, { ...actual, ...wanted });
  const from = Object.fromEntries(changed.map((key) => [key, actual[key]]));
  log?.warn({ stream, from, to: Object.fromEntries(changed.map((key) => [key, wanted[key]])) }, 'corrected the settings of a JetStream stream');
  return false;
}

/**
 * Asks streams to elect other leaders until no node leads more than its share of `streams`.
 * JetStream places the leaders of replicated streams created together as it likes, often all on
 * one node, which would send every write of a partitioned table through that node again. A
 * stream led by the busiest node steps down and its replicas elect another leader — at random
 * (nats-server 2.9 takes no preference), so this goes round a few times. Best effort: a spread
 * left uneven is logged. An election pauses the stream's writes for a moment, so this runs
 * when streams are created, not at every start.
 */
export async function spreadLeaders(nc: NatsConnection, jsm: JetStreamManager, streams: readonly string[], log?: Logger): Promise<void> {
  for (let round = 0; round < 4 * streams.length; round++) {
    const led = new Map<string, string[]>();
    for (const stream of streams) {
      const cluster = (await jsm.streams.info(stream)).cluster;
      if (!cluster?.leader) return; // a single server, or an election under way: nothing to spread
      for (const replica of cluster.replicas ?? []) if (!led.has(replica.name)) led.set(replica.name, []);
      led.set(cluster.leader, [...(led.get(cluster.leader) ?? []), stream]);
    }
    const share = Math.ceil(streams.length / led.size);
    const [busiest, leading] = [...led].reduce((a, b) => (b[1].length > a[1].length ? b : a));
    if (leading.length <= share) return;
    await stepDown(nc, jsm, leading[0]!, busiest);
  }
  log?.warn({ streams }, 'the leaders of these partition streams could not be spread evenly over the nodes');
}

/** Asks a stream's leader to step down, and waits (up to 10 s) until another node leads it. */
async function stepDown(nc: NatsConnection, jsm: JetStreamManager, stream: string, leader: string): Promise<void> {
  await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, undefined, { timeout: 5000 });
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const now = await jsm.streams.info(stream).then((info) => info.cluster?.leader, () => undefined);
    if (now && now !== leader) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** JetStream's answer to a publish into a stream at its max_bytes (or max_msgs) with discard new. */
export const STREAM_FULL_CODES = new Set([10077, 10076]);

export function isStreamFull(err: unknown): boolean {
  return err instanceof JetStreamApiError && STREAM_FULL_CODES.has(err.code);
}

/** A shared durable pull consumer as Sluice wants it: explicit acks; what can change in place is set at every start. */
export interface DurableSettings {
  name: string;
  ackWaitMs: number;
  maxAckPending: number;
  /** Deliveries before JetStream gives up on a message; -1 (the default) never. */
  maxDeliver?: number;
  /** Only this subject of the stream (a work-queue stream's consumers must not overlap). */
  filterSubject?: string;
}

/** Creates the durable consumer of `stream`, or brings the one there is to these settings. Idempotent: every process may call it. */
export async function ensureDurableConsumer(jsm: JetStreamManager, stream: string, wanted: DurableSettings): Promise<void> {
  const changeable = { ack_wait: wanted.ackWaitMs * 1_000_000, max_ack_pending: wanted.maxAckPending, max_deliver: wanted.maxDeliver ?? -1 };
  if (await jsm.consumers.info(stream, wanted.name).catch(() => undefined)) {
    await jsm.consumers.update(stream, wanted.name, changeable);
    return;
  }
  const filter = wanted.filterSubject ? { filter_subject: wanted.filterSubject } : {};
  await jsm.consumers.add(stream, { durable_name: wanted.name, ack_policy: AckPolicy.Explicit, ...filter, ...changeable }).catch(async (err) => {
    // Another process created it between our two calls.
    if (!(await jsm.consumers.info(stream, wanted.name).catch(() => undefined))) throw err;
  });
}
