/**
 * Agent timestamps: an RFC 3339 time with up to nine fractional digits ("2026-11-22T10:00:00.123456789Z",
 * "2026-11-22T11:00:00+01:00"), or epoch nanoseconds as an integer or a string of digits.
 * Both become epoch nanoseconds as a bigint, exactly (Date.parse alone would lose the digits
 * past milliseconds).
 */

const RFC3339 = /^(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;
const DIGITS = /^\d{1,19}$/;

/**
 * Epoch nanoseconds below this are refused: they are almost surely seconds, milliseconds or
 * microseconds sent by mistake (1e17 ns is 1973-03-03).
 */
export const MIN_EPOCH_NANOS = 100_000_000_000_000_000n;
/** DateTime64(9) ends in 2262; Int64 nanoseconds too. */
export const MAX_EPOCH_NANOS = 9_223_372_036_854_775_807n;

export function parseTimestamp(value: string | number): bigint | undefined {
  let nanos: bigint;
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) return undefined;
    nanos = BigInt(value);
  } else if (DIGITS.test(value)) {
    nanos = BigInt(value);
  } else {
    const match = RFC3339.exec(value);
    if (!match) return undefined;
    const [, dateTime, fraction = '', offset] = match;
    const millis = Date.parse(`${dateTime!.replace(/[t ]/, 'T')}${offset!.toUpperCase()}`);
    // Date.parse rolls 2026-02-30 over to March; a real calendar date must survive the round trip.
    if (Number.isNaN(millis) || !sameCalendarDate(dateTime!, offset!, millis)) return undefined;
    nanos = BigInt(millis) * 1_000_000n + BigInt(fraction.padEnd(9, '0'));
  }
  return nanos >= MIN_EPOCH_NANOS && nanos <= MAX_EPOCH_NANOS ? nanos : undefined;
}

function sameCalendarDate(dateTime: string, offset: string, millis: number): boolean {
  const sign = offset.startsWith('-') ? -1 : 1;
  const offsetMinutes = offset.length === 1 ? 0 : sign * (Number(offset.slice(1, 3)) * 60 + Number(offset.slice(4)));
  const local = new Date(millis + offsetMinutes * 60_000).toISOString();
  return local.slice(0, 10) === dateTime.slice(0, 10) && local.slice(11, 19) === dateTime.slice(11, 19);
}

/** The current time in epoch nanoseconds (millisecond precision). */
export function nowNanos(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}
