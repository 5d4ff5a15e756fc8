/**
 * Reading stored submissions back, per form and newest first, for the admin API and the CLI.
 * They live in storage (relay_submissions), so this reads through the Storage interface; a
 * process without storage (a cluster gateway with no CLICKHOUSE_URL) answers 503 saying so. A
 * request retried with its Idempotency-Key writes its submission's row again, the same row: it
 * is listed once.
 *
 * A search (`q`) reads every submission of the form: like a console query, it runs under the
 * statement limits (a limit reached is 422 saying to narrow it) and takes its turn in the read
 * gate, per tenant, with the console's reads; on the embedded default it runs beside the inserts.
 */
import type { ReadGate } from '../core/read-gate.ts';
import { DEFAULT_STATEMENT_LIMITS, limitedRows, type StatementLimits } from '../storage/statement-limits.ts';
import { quoteIdentifier, quoteString, type Storage } from '../storage/storage.ts';
import { validationFailed } from './errors.ts';

export const MAX_PAGE = 200;

/** A page of a listing, newest first (submissions, templates). */
export interface PageQuery {
  /** Default 50, at most MAX_PAGE. */
  limit?: number;
  /** Only items older than this cursor (the previous page's `nextBefore`). */
  before?: string;
}
/** A form's submissions: a page, and only those whose data, subject or body holds `q` (any case). */
export interface SubmissionQuery extends PageQuery {
  q?: string;
}
export const MAX_SEARCH_CHARS = 200;
/** What a search stopped by a limit is told to do. */
const SEARCH_ADVICE = 'Narrow the search: look for longer, more specific text, then try again.';

/** The page's size: 50 unless given; 400 naming `limit` unless a whole number from 1 to MAX_PAGE. */
export function pageLimit(query: PageQuery): number {
  const limit = query.limit ?? 50;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE) throw validationFailed('limit', `must be a whole number from 1 to ${MAX_PAGE}`);
  return limit;
}

export interface SubmissionView {
  submissionId: string;
  kind: string;
  receivedAt: string;
  data: unknown;
  subject: string;
  body: string;
  meta: { ip: string; origin: string; userAgent: string };
  /** Delivery jobs queued with it. */
  jobs: number;
}

interface Row {
  submissionId: string;
  kind: string;
  nanos: string;
  Data: string;
  Subject: string;
  Body: string;
  Ip: string;
  Origin: string;
  UserAgent: string;
  Jobs: number;
}

export class SubmissionReader {
  /** @param storage the process's storage (rejects with 503 where it has none) */
  constructor(
    private readonly storage: () => Promise<Storage>,
    private readonly database: string,
    private readonly gate: ReadGate,
    private readonly limits: Readonly<StatementLimits> = DEFAULT_STATEMENT_LIMITS,
  ) {}

  async list(tenantId: string, siteId: string, formId: string, query: SubmissionQuery = {}): Promise<{ submissions: SubmissionView[]; nextBefore?: string }> {
    const limit = pageLimit(query);
    const cursor = query.before === undefined ? undefined : /^(\d{1,20})_([0-9a-f-]{36})$/.exec(query.before);
    if (cursor === null) throw validationFailed('before', 'must be a cursor from nextBefore');
    if (query.q !== undefined && (query.q.length === 0 || query.q.length > MAX_SEARCH_CHARS)) throw validationFailed('q', `must be 1 to ${MAX_SEARCH_CHARS} characters`);
    const storage = await this.storage();
    const where = [`TenantId = ${quoteString(tenantId)}`, `SiteId = ${quoteString(siteId)}`, `FormId = ${quoteString(formId)}`];
    // Many submissions share a millisecond: the cursor is (time, id), in the order of the listing.
    if (cursor) where.push(`(toUnixTimestamp64Nano(ReceivedAt), SubmissionId) < (${cursor[1]}, toUUID(${quoteString(cursor[2]!)}))`);
    // The data as stored (JSON), the subject and the body the notification was made of.
    if (query.q !== undefined) where.push(`positionCaseInsensitiveUTF8(concat(Data, '\n', Subject, '\n', Body), ${quoteString(query.q)}) > 0`);
    const sql = `SELECT toString(SubmissionId) AS submissionId, Kind AS kind, toString(toUnixTimestamp64Nano(ReceivedAt)) AS nanos,
      Data, Subject, Body, Ip, Origin, UserAgent, Jobs
      FROM ${quoteIdentifier(this.database)}.relay_submissions WHERE ${where.join(' AND ')}
      ORDER BY ReceivedAt DESC, SubmissionId DESC LIMIT 1 BY SubmissionId LIMIT ${limit + 1}`;
    const [what, advice] = query.q === undefined ? ['listing', 'Ask for a smaller page, then try again.'] : ['search', SEARCH_ADVICE];
    const rows = await this.gate.run(tenantId, () => limitedRows<Row>(storage, sql, this.limits, what, advice));
    const page = rows.slice(0, limit);
    const submissions = page.map((row) => ({
      submissionId: row.submissionId,
      kind: row.kind,
      receivedAt: new Date(Number(BigInt(row.nanos) / 1_000_000n)).toISOString(),
      data: JSON.parse(row.Data) as unknown,
      subject: row.Subject,
      body: row.Body,
      meta: { ip: row.Ip, origin: row.Origin, userAgent: row.UserAgent },
      jobs: Number(row.Jobs),
    }));
    const last = page[page.length - 1];
    return rows.length > limit && last ? { submissions, nextBefore: `${last.nanos}_${last.submissionId}` } : { submissions };
  }
}
