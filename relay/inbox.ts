/**
 * The development inbox as the relay's admin API and the operator's CLI read it (delivery/inbox.ts
 * keeps it; SLUICE_DELIVERY_INBOX turns it on). A user sees their tenant's messages only; the
 * operator may list every tenant's. With the inbox off every listing is a 404 saying so.
 */
import { MAX_INBOX_PAGE, type DevelopmentInbox, type InboxMessage } from '../delivery/index.ts';
import { RelayError, validationFailed } from './errors.ts';

/** What the relay reads of the inbox. */
export type InboxReader = Pick<DevelopmentInbox, 'list'>;

export interface InboxListing {
  /** Default 50, at most MAX_INBOX_PAGE. */
  limit?: number;
  /**
   * Wait (up to WAIT_LIMIT_MS) until the listing holds at least this many messages: delivery runs
   * a moment after a submission's 201. The listing is answered either way.
   */
  waitFor?: number;
}

export const DEFAULT_INBOX_PAGE = 50;
/** The longest a listing waits for messages to come. */
export const WAIT_LIMIT_MS = 30_000;
const POLL_MS = 200;

export const INBOX_OFF_MESSAGE = 'The development inbox is off: start Sluice with SLUICE_DELIVERY_INBOX=true (embedded default only) to keep messages instead of sending them';

export class RelayInbox {
  constructor(private readonly reader: InboxReader | undefined) {}

  /** Whether the inbox is on in this process. */
  get on(): boolean {
    return this.reader !== undefined;
  }

  /** One tenant's messages, newest first. */
  list(tenantId: string, query: InboxListing): Promise<{ messages: InboxMessage[] }> {
    return this.read({ tenantId }, query);
  }

  /** Every tenant's messages (and tenant discovery emails, which belong to none), newest first: the operator's. */
  listAll(query: InboxListing): Promise<{ messages: InboxMessage[] }> {
    return this.read({}, query);
  }

  private async read(scope: { tenantId?: string }, query: InboxListing): Promise<{ messages: InboxMessage[] }> {
    const reader = this.reader;
    if (!reader) throw new RelayError(404, INBOX_OFF_MESSAGE);
    const limit = query.limit ?? DEFAULT_INBOX_PAGE;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_INBOX_PAGE) throw validationFailed('limit', `must be a whole number from 1 to ${MAX_INBOX_PAGE}`);
    const waitFor = query.waitFor ?? 0;
    if (!Number.isSafeInteger(waitFor) || waitFor < 0 || waitFor > limit) throw validationFailed('waitFor', 'must be a whole number from 0 to the limit');
    const deadline = Date.now() + WAIT_LIMIT_MS;
    for (;;) {
      const messages = await reader.list({ ...scope, limit });
      if (messages.length >= waitFor || Date.now() >= deadline) return { messages };
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }
}
