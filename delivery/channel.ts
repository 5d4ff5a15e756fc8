/**
 * What a channel sender is given and what it answers. A sender makes one attempt to hand one
 * message to one destination and classifies the result; it never throws for a failure of the
 * destination or the provider (a refused address, a bad credential, a timeout), only for a bug.
 * The worker (delivery/worker.ts) turns the outcome into the job's next state: delivered,
 * retried later (transient), or dead (permanent).
 */

/** A message ready to send: rendered from the form's template or the notification's own subject and body. */
export interface RenderedMessage {
  /** One line, no CR or LF. */
  subject: string;
  /** HTML body: submission values already escaped, a notification's body already sanitised. */
  html: string;
  /** Plain-text alternative of `html`. */
  text: string;
  /** The submitter's address, when the submission holds a valid one. */
  replyTo?: string;
}

export type AttemptOutcome =
  | { kind: 'delivered'; providerStatus: string; providerId?: string }
  /** May succeed later: retried with backoff, no sooner than `retryAfterMs` when the provider said so. */
  | { kind: 'transient'; error: string; providerStatus: string; retryAfterMs?: number }
  /** Cannot succeed as it is (a refused address, a 4xx, a bad credential): the job goes dead. */
  | { kind: 'permanent'; error: string; providerStatus: string };

/** The longest error text kept in an attempt record. */
export const MAX_ERROR_CHARS = 1000;

export function clip(text: string, limit = MAX_ERROR_CHARS): string {
  return text.length <= limit ? text : `${text.slice(0, limit - 1)}…`;
}
