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
  /** Plain-text alternative of `html`, made by whoever rendered the message: a sender sends it as it is (none when empty). */
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

/** A Retry-After longer than this is taken as this: a broken peer must not park a job for weeks. */
const MAX_RETRY_AFTER_MS = 24 * 60 * 60 * 1000;

/** Retry-After as milliseconds from now: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1000, MAX_RETRY_AFTER_MS);
  // The three HTTP date formats start with the day's name; Date.parse alone would take '-5' for a year.
  const at = /^[A-Za-z]{3}/.test(text) ? Date.parse(text) : Number.NaN;
  return Number.isNaN(at) ? undefined : Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS);
}
