/** Names of the JetStream objects Sluice uses, in one place. */

/**
 * The stream and subject that carry one partition of a table's rows. Partition 0 keeps the
 * names a table had before streams were partitioned, so an existing stream becomes partition 0
 * and an unpartitioned deployment keeps its names.
 */
export function streamOf(prefix: string, table: string, partition = 0): { stream: string; subject: string } {
  const stream = `${prefix}_ROWS_${table.toUpperCase()}`;
  const subject = `${prefix.toLowerCase()}.rows.${table}`;
  return partition === 0 ? { stream, subject } : { stream: `${stream}_P${partition}`, subject: `${subject}.p${partition}` };
}

/** The partition of `table` that stream `name` carries, or undefined when it is not one of the table's streams. */
export function partitionOf(prefix: string, table: string, name: string): number | undefined {
  const base = streamOf(prefix, table).stream;
  if (name === base) return 0;
  const match = name.startsWith(`${base}_P`) ? /^[1-9][0-9]{0,5}$/.exec(name.slice(base.length + 2)) : null;
  return match ? Number(match[0]) : undefined;
}

/** Most partitions a table may have: each is a stream, a durable consumer, and a pull loop in every consumer process. */
export const MAX_PARTITIONS = 32;

/**
 * Partitions per table from SLUICE_NATS_PARTITIONS: a bare number for every table not named,
 * `table=N` for one (`2,otel_traces=6`). Throws naming every problem.
 */
export function parsePartitions(setting: string, tables: readonly string[]): Map<string, number> {
  const problems: string[] = [];
  const named = new Map<string, number>();
  let others = 1;
  const count = (text: string, what: string): number => {
    const n = Number(text);
    if (Number.isSafeInteger(n) && n >= 1 && n <= MAX_PARTITIONS) return n;
    problems.push(`${what}: partitions must be a whole number from 1 to ${MAX_PARTITIONS}, not ${JSON.stringify(text)}`);
    return 1;
  };
  for (const item of setting.split(',').map((part) => part.trim()).filter(Boolean)) {
    const [table, n] = item.split('=') as [string, string | undefined];
    if (n === undefined) others = count(table, 'every table');
    else if (!tables.includes(table)) problems.push(`${table}: not a table (tables: ${tables.join(', ')})`);
    else named.set(table, count(n, table));
  }
  if (problems.length > 0) throw new Error(`SLUICE_NATS_PARTITIONS=${JSON.stringify(setting)}: ${problems.join('; ')}`);
  return new Map(tables.map((table) => [table, named.get(table) ?? others]));
}

/** Where messages that keep failing for a reason other than a storage outage are parked. */
export function deadLetterOf(prefix: string): { stream: string; subject: (table: string) => string } {
  return { stream: `${prefix}_DEADLETTER`, subject: (table) => `${prefix.toLowerCase()}.deadletter.${table}` };
}

/** The shared durable consumer of a table stream: every `sluice consume` process pulls from it. */
export const DURABLE = 'sluice-storage';

/** The KV bucket of batch manifests (see jetstream-consumer.ts). */
export function manifestBucketOf(prefix: string): string {
  return `${prefix.toLowerCase()}_batches`;
}

/** The delivery queue's work-queue stream and subject of jobs that are due. */
export function deliveryStreamOf(prefix: string): { stream: string; subject: string } {
  return { stream: `${prefix}_DELIVERY`, subject: `${prefix.toLowerCase()}.delivery.jobs` };
}

/**
 * The delivery queue's stream of jobs not due yet: new ones (intake publishes here) and ones
 * waiting for a retry or a slot. A subject and a shared durable consumer per tier of delay
 * (delivery/delay-tiers.ts).
 */
export function deliveryWaitingStreamOf(prefix: string) {
  const base = `${prefix.toLowerCase()}.delivery.waiting`;
  return {
    stream: `${prefix}_DELIVERY_WAITING`,
    subjects: `${base}.>`,
    subject: (tier: { name: string }) => `${base}.${tier.name}`,
    durable: (tier: { name: string }) => `sluice-delivery-waiting-${tier.name}`,
  };
}

/** The shared durable consumer of the delivery stream: every `sluice deliver` process pulls from it. */
export const DELIVERY_DURABLE = 'sluice-delivery';

/**
 * The header of a message holding several requests' rows: `bytes:rows` per request, in order.
 * A consumer whose insert of the message is refused stores each request's rows on their own
 * and parks only the refused ones: one client's bad rows never park another's.
 */
export const PARTS_HEADER = 'Sluice-Parts';
