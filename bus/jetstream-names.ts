/** Names of the JetStream objects Sluice uses, in one place. */

/** The stream and subject that carry one table's rows. */
export function streamOf(prefix: string, table: string): { stream: string; subject: string } {
  return { stream: `${prefix}_ROWS_${table.toUpperCase()}`, subject: `${prefix.toLowerCase()}.rows.${table}` };
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
