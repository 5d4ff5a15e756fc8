/**
 * Jobs as the delivery queues write them: the records of the embedded queue's write-ahead log
 * (local-queue.ts, bus/record-log.ts), and the bundle of a submission's jobs that the JetStream
 * queue publishes as one message (jetstream-queue.ts). A record is a small JSON head and, for
 * added jobs, their contents after it, so reading the heads back (opening the queue) never
 * parses a message:
 *
 *   u32 head length | head (JSON) | contents (JSON array; `add` only)
 *
 * - `add`: jobs without their content, each naming its content by index: the jobs of one
 *   submission share one content, written once. One enqueue is one record, so it is all or
 *   nothing. A job carries its progress, so that compaction can write a job again as it stands.
 * - `progress`: an attempt counted (before it starts) or the next attempt's time.
 * - `done`: delivered or dead; forgotten.
 */
import { RECORD_FRAME_BYTES, type RecordCodec } from '../bus/record-log.ts';
import { seriesKey, type DeliveryJob } from './job.ts';

export type JobContent = DeliveryJob['content'];

/** A job as an `add` record holds it: its content by index, and its progress. */
export interface StoredJob extends Omit<DeliveryJob, 'content'> {
  content: number;
  attempts: number;
  /** Epoch ms before which the job is not handed out. */
  notBefore: number;
}

export type QueueHead =
  | { op: 'add'; jobs: StoredJob[] }
  | { op: 'progress'; key: string; attempts: number; notBefore: number }
  | { op: 'done'; key: string };

/** A record as written, and as read back: its contents unparsed (a view, see RecordLog.read). */
export interface QueueRecord {
  head: QueueHead;
  contents?: Uint8Array;
}

export const QUEUE_CODEC: RecordCodec<QueueRecord> = {
  encode({ head, contents }) {
    const headBytes = Buffer.from(JSON.stringify(head));
    const length = Buffer.allocUnsafe(4);
    length.writeUInt32LE(headBytes.length, 0);
    return contents ? [length, headBytes, contents] : [length, headBytes];
  },
  decode(payload) {
    const headLength = payload.readUInt32LE(0);
    const head = JSON.parse(payload.toString('utf8', 4, 4 + headLength)) as QueueHead;
    const contents = payload.subarray(4 + headLength);
    return contents.length > 0 ? { head, contents } : { head };
  },
};

/** The `add` record of these jobs at these progresses: each distinct content (by identity) written once. */
export function addRecord(jobs: ReadonlyArray<{ job: DeliveryJob; attempts: number; notBefore: number }>): QueueRecord {
  const indexes = new Map<JobContent, number>();
  const contents: JobContent[] = [];
  const stored = jobs.map(({ job, attempts, notBefore }): StoredJob => {
    let index = indexes.get(job.content);
    if (index === undefined) {
      index = contents.push(job.content) - 1;
      indexes.set(job.content, index);
    }
    return { ...job, content: index, attempts, notBefore };
  });
  return { head: { op: 'add', jobs: stored }, contents: Buffer.from(JSON.stringify(contents)) };
}

/** The jobs of an `add` record read back, by series key, with their contents (parsed once, shared as written). */
export function jobsOf(record: QueueRecord): Map<string, DeliveryJob> {
  const jobs = new Map<string, DeliveryJob>();
  if (record.head.op !== 'add' || !record.contents) return jobs;
  const contents = JSON.parse(Buffer.from(record.contents.buffer, record.contents.byteOffset, record.contents.byteLength).toString('utf8')) as JobContent[];
  for (const { content, attempts: _attempts, notBefore: _notBefore, ...job } of record.head.jobs) jobs.set(seriesKey(job), { ...job, content: contents[content]! });
  return jobs;
}

/** The record as one buffer (a message's body). */
export function encodeRecord(record: QueueRecord): Buffer {
  return Buffer.concat(QUEUE_CODEC.encode(record));
}

/** The bytes a record takes in the log, its frame included. */
export function recordBytes(record: QueueRecord): number {
  return RECORD_FRAME_BYTES + QUEUE_CODEC.encode(record).reduce((sum, part) => sum + part.byteLength, 0);
}
