/**
 * JetStream failures that mean "nothing was done, ask again in a moment": shared by the state
 * store's reads and the bus's withdrawals, which both ride through elections.
 */
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { errors } from '@nats-io/transport-node';

/**
 * Whether no stream took a request, for a moment: the stream has no leader (its nodes are
 * electing one: no responders, which nats.js reports as "jetstream is not enabled") or JetStream
 * is not ready yet (a node just restarted answers 503).
 */
export function noStreamYet(err: unknown): boolean {
  // nats.js does not export JetStreamNotEnabled: known by its name.
  return (err instanceof Error && err.name === 'JetStreamNotEnabled') || err instanceof errors.NoRespondersError ||
    (err instanceof errors.RequestError && err.isNoResponders()) || (err instanceof JetStreamApiError && err.status === 503);
}

/**
 * "stream not found". Also what a node answers for a stream it has not loaded yet, just after it
 * restarted: a caller that knows the stream was there moments ago (a withdrawal, within the
 * duplicate window) asks again rather than give up.
 */
export function streamNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound;
}

/** "consumer not found": deleted already (by another process, say). */
export function consumerNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound;
}

/**
 * A KV create or update refused because the key is not at the revision it expected: someone
 * else wrote it first. Any other failure (a timeout, no leader) says nothing about the key.
 */
export function revisionConflict(err: unknown): boolean {
  return /wrong last sequence|key exists/i.test((err as Error)?.message ?? '');
}
