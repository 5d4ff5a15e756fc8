/**
 * Reading the delivery history back for the admin API and the CLI: a form's jobs with their
 * state (dead first), one job's attempts, and a job as it was created (for a manual retry). Jobs
 * are rows of relay_delivery_jobs (content: their submission's row); their state is the latest
 * record in relay_delivery_attempts, and `queued` while there is none.
 *
 * Every read runs under the statement limits (a form's jobs are read against all its
 * submissions; a limit reached is 422) and takes its turn in the read gate, per tenant.
 */
import type { ReadGate } from '../core/read-gate.ts';
import { DEFAULT_STATEMENT_LIMITS, limitedRows, type StatementLimits } from '../storage/statement-limits.ts';
import { quoteIdentifier, quoteString, type Storage } from '../storage/storage.ts';
import { type DeliveryChannel, type DeliveryJob, type JobKind, type JobState } from './job.ts';

export interface JobView {
  jobId: string;
  submissionId: string;
  kind: string;
  channel: string;
  destination: string;
  createdAt: string;
  state: JobState;
  /** The series of the latest record (1, then +1 per manual retry). */
  series: number;
  /** Attempts made in that series. */
  attempts: number;
  lastError: string;
  providerStatus: string;
  updatedAt: string | null;
  /** When a failed job is tried next. */
  nextAttemptAt: string | null;
}

export interface AttemptView {
  series: number;
  attempt: number;
  state: string;
  at: string;
  durationMs: number;
  error: string;
  providerStatus: string;
  nextAttemptAt: string | null;
}

export interface JobQuery {
  state?: JobState;
  limit: number;
}

/** The order of a listing: what needs someone first. */
const NEEDS_ATTENTION_FIRST: readonly JobState[] = ['dead', 'failed', 'sending', 'queued', 'delivered', 'withdrawn'];

/**
 * The order of a job's records: an attempt's outcome after its start even when both were written
 * in the same millisecond (a send that fails at once), whatever order storage keeps them in.
 */
const RECORD_ORDER = `(Series, Attempt, State NOT IN ('queued', 'sending'), At)`;

/**
 * The latest record of each job, as columns of one row per JobId; its last error is the latest
 * series' (a manual retry that delivered shows no error of the series before it).
 * (Aliases differ from the columns: ClickHouse would read `Series` in a later argMax as the alias.)
 */
const LATEST = `argMax(State, ${RECORD_ORDER}) AS LatestState, max(Series) AS LatestSeries, argMax(Attempt, ${RECORD_ORDER}) AS Attempts,
  argMax(Error, (Series, Error != '', Attempt, State NOT IN ('queued', 'sending'), At)) AS LastError, argMax(ProviderStatus, ${RECORD_ORDER}) AS LastProviderStatus,
  toString(toUnixTimestamp64Milli(max(At))) AS UpdatedMs, toString(toUnixTimestamp64Milli(argMax(NextAttemptAt, ${RECORD_ORDER}))) AS NextMs`;

/** A tenant's job rows (the condition goes on with AND). */
const JOB_ROWS = (db: string, tenant: string) => `SELECT * FROM ${db}.relay_delivery_jobs WHERE TenantId = ${tenant}`;
/**
 * A request retried with its Idempotency-Key stores its submission and jobs again under the
 * same ids (relay/intake.ts): a job is listed once, as first written.
 */
const ONE_ROW_PER_JOB = 'ORDER BY CreatedAt LIMIT 1 BY JobId';

export class DeliveryHistory {
  constructor(
    private readonly storage: () => Promise<Storage>,
    private readonly database: string,
    private readonly gate: ReadGate,
    private readonly limits: Readonly<StatementLimits> = DEFAULT_STATEMENT_LIMITS,
  ) {}

  /** A form's jobs, dead first, then failed, sending, queued, delivered; newest first within each. */
  async jobs(tenantId: string, formId: string, query: JobQuery): Promise<JobView[]> {
    const db = quoteIdentifier(this.database);
    const t = quoteString(tenantId);
    const f = quoteString(formId);
    const order = `[${NEEDS_ATTENTION_FIRST.map(quoteString).join(', ')}]`;
    const sql = `SELECT * FROM (
      SELECT toString(j.JobId) AS jobId, j.SubmissionId AS submissionId, j.Kind AS kind, j.Channel AS channel, j.Destination AS destination,
        toString(toUnixTimestamp64Milli(j.CreatedAt)) AS createdMs, if(a.LatestState = '', 'queued', a.LatestState) AS state, a.LatestSeries AS series,
        a.Attempts AS attempts, a.LastError AS lastError, a.LastProviderStatus AS providerStatus, a.UpdatedMs AS updatedMs, a.NextMs AS nextMs
      FROM (${JOB_ROWS(db, t)} AND SubmissionId IN (SELECT toString(SubmissionId) FROM ${db}.relay_submissions WHERE TenantId = ${t} AND FormId = ${f}) ${ONE_ROW_PER_JOB}) AS j
      LEFT JOIN (SELECT JobId, ${LATEST} FROM ${db}.relay_delivery_attempts WHERE TenantId = ${t} AND FormId = ${f} GROUP BY JobId) AS a ON a.JobId = j.JobId
    ) ${query.state ? `WHERE state = ${quoteString(query.state)}` : ''}
    ORDER BY indexOf(${order}, state), createdMs DESC, jobId LIMIT ${query.limit}`;
    return (await this.rows<Record<string, string | number>>(tenantId, sql)).map((row) => ({
      jobId: String(row.jobId),
      submissionId: String(row.submissionId),
      kind: String(row.kind),
      channel: String(row.channel),
      destination: String(row.destination),
      createdAt: iso(row.createdMs)!,
      state: row.state as JobState,
      series: Number(row.series) || 1,
      attempts: Number(row.attempts),
      lastError: String(row.lastError ?? ''),
      providerStatus: String(row.providerStatus ?? ''),
      updatedAt: iso(row.updatedMs),
      nextAttemptAt: row.state === 'failed' ? iso(row.nextMs) : null,
    }));
  }

  /** Every record of one job, oldest first. */
  async attempts(tenantId: string, jobId: string): Promise<AttemptView[]> {
    const sql = `SELECT Series, Attempt, State, toString(toUnixTimestamp64Milli(At)) AS AtMs, DurationMs, Error, ProviderStatus,
        toString(toUnixTimestamp64Milli(NextAttemptAt)) AS NextMs
      FROM ${quoteIdentifier(this.database)}.relay_delivery_attempts
      WHERE TenantId = ${quoteString(tenantId)} AND JobId = toUUIDOrZero(${quoteString(jobId)}) ORDER BY ${RECORD_ORDER}`;
    return (await this.rows<Record<string, string | number>>(tenantId, sql)).map((row) => ({
      series: Number(row.Series),
      attempt: Number(row.Attempt),
      state: String(row.State),
      at: iso(row.AtMs)!,
      durationMs: Number(row.DurationMs),
      error: String(row.Error),
      providerStatus: String(row.ProviderStatus),
      nextAttemptAt: row.State === 'failed' ? iso(row.NextMs) : null,
    }));
  }

  /** The job as created (its latest series and state beside it), or undefined when the tenant has no such job. */
  async job(tenantId: string, jobId: string): Promise<{ job: DeliveryJob; state: JobState } | undefined> {
    return (await this.created(tenantId, [jobId]))[0];
  }

  /** Jobs as created, with their latest series and state: two queries however many are asked for (a retry of all dead jobs). */
  async created(tenantId: string, jobIds: readonly string[]): Promise<Array<{ job: DeliveryJob; state: JobState }>> {
    if (jobIds.length === 0) return [];
    const db = quoteIdentifier(this.database);
    const t = quoteString(tenantId);
    const ids = `(${jobIds.map((id) => `toUUIDOrZero(${quoteString(id)})`).join(', ')})`;
    const rows = await this.rows<Record<string, string | number>>(tenantId, `SELECT toString(j.JobId) AS jobId, j.SubmissionId AS submissionId, j.Kind AS kind,
        j.Channel AS channel, j.Destination AS destination, j.Subject AS subject, j.Body AS body, toString(toUnixTimestamp64Milli(j.CreatedAt)) AS createdMs,
        if(a.LatestState = '', 'queued', a.LatestState) AS state, a.LatestSeries AS series
      FROM (${JOB_ROWS(db, t)} AND JobId IN ${ids} ${ONE_ROW_PER_JOB}) AS j
      LEFT JOIN (SELECT JobId, ${LATEST} FROM ${db}.relay_delivery_attempts WHERE TenantId = ${t} AND JobId IN ${ids} GROUP BY JobId) AS a ON a.JobId = j.JobId`);
    const submissionIds = [...new Set(rows.map((row) => String(row.submissionId)).filter(Boolean))];
    const submissions = new Map(submissionIds.length === 0 ? [] : (await this.rows<Record<string, string>>(tenantId, `SELECT toString(SubmissionId) AS id, SiteId, FormId, Data, Subject, Body
        FROM ${db}.relay_submissions WHERE TenantId = ${t} AND SubmissionId IN (${submissionIds.map((id) => `toUUIDOrZero(${quoteString(id)})`).join(', ')})`)).map((row) => [row.id!, row]));
    return rows.map((row) => {
      const submissionId = String(row.submissionId);
      const submission = submissions.get(submissionId);
      const job: DeliveryJob = {
        id: String(row.jobId),
        series: Number(row.series) || 1,
        tenantId,
        siteId: submission?.SiteId ?? '',
        formId: submission?.FormId ?? '',
        submissionId,
        kind: String(row.kind) as JobKind,
        channel: String(row.channel) as DeliveryChannel,
        destination: String(row.destination),
        createdAt: iso(row.createdMs)!,
        content: submission
          ? { data: JSON.parse(submission.Data!) as Record<string, unknown>, subject: submission.Subject!, body: submission.Body! }
          : { data: {}, subject: String(row.subject), body: String(row.body) },
      };
      return { job, state: row.state as JobState };
    });
  }

  private async rows<T>(tenantId: string, sql: string): Promise<T[]> {
    const storage = await this.storage();
    return this.gate.run(tenantId, () => limitedRows<T>(storage, sql, this.limits, 'listing', 'Ask for fewer jobs, or only those in one state, then try again.'));
  }
}

function iso(ms: string | number | undefined): string | null {
  const value = Number(ms);
  return Number.isFinite(value) && value > 0 ? new Date(value).toISOString() : null;
}
