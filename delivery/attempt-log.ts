/**
 * AttemptLog: writes the delivery history (relay_delivery_attempts) through the bus, the same way
 * as every other row. The history serves the admin and the metrics; it never decides delivery: a
 * record that cannot be written (storage away) is logged and counted, and the attempt goes on — a
 * message is never held back, or sent twice, because its history could not be written.
 */
import type { Bus } from '../bus/bus.ts';
import type { Logger } from '../core/log.ts';
import { TranscodeOutput } from '../storage/table-rows.ts';
import { clip } from './channel.ts';
import type { DeliveryJob, JobState } from './job.ts';

export interface AttemptDetail {
  durationMs?: number;
  error?: string;
  providerStatus?: string;
  /** Epoch ms of the next attempt (a `failed` record). */
  nextAttemptAt?: number;
}

export class AttemptLog {
  /** Records not written (for /metrics). */
  lost = 0;

  constructor(private readonly bus: Bus, private readonly log: Logger) {}

  /** One history row; attempt 0 is a `queued` record of a new series. */
  async record(job: DeliveryJob, attempt: number, state: JobState, detail: AttemptDetail = {}): Promise<void> {
    const out = new TranscodeOutput();
    const rows = out.table('relay_delivery_attempts');
    const w = rows.writer;
    w.string(job.tenantId);
    w.uuid(job.id);
    for (const value of [job.submissionId, job.formId, job.channel, job.destination]) w.string(value);
    w.u32(job.series);
    w.u32(attempt);
    w.string(state);
    w.dateTime64(BigInt(Date.now()) * 1_000_000n);
    w.u32(Math.max(0, Math.round(detail.durationMs ?? 0)));
    w.string(clip(detail.error ?? ''));
    w.string(clip(detail.providerStatus ?? '', 200));
    w.dateTime64(BigInt(detail.nextAttemptAt ?? 0) * 1_000_000n);
    rows.endRow();
    try {
      await this.bus.publish(out.finish().tables);
    } catch (err) {
      this.lost++;
      this.log.error({ err: (err as Error).message, job: job.id, series: job.series, attempt, state }, 'delivery history: a record could not be written');
    }
  }
}
