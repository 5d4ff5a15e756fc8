/**
 * Agent timestamps: an RFC 3339 time with up to nine fractional digits ("2026-11-22T10:00:00.123456789Z",
 * "2026-11-22T11:00:00+01:00"), or epoch nanoseconds as an integer or a string of digits.
 * Both become epoch nanoseconds exactly (Date.parse alone would lose the digits past
 * milliseconds).
 *
 * Every entry of a log batch has one, read twice (the schema's format check, then the row),
 * so the text is read character by character into whole seconds and nanoseconds: no regular
 * expression, Date or bigint on the way (they cost several microseconds per entry).
 */

/**
 * Epoch nanoseconds below this are refused: they are almost surely seconds, milliseconds or
 * microseconds sent by mistake (1e17 ns is 1973-03-03).
 */
export const MIN_EPOCH_NANOS = 100_000_000_000_000_000n;
/** DateTime64(9) ends in 2262; Int64 nanoseconds too. */
export const MAX_EPOCH_NANOS = 9_223_372_036_854_775_807n;

/** MIN_EPOCH_NANOS and MAX_EPOCH_NANOS as whole seconds and the nanoseconds past them. */
const MIN_SECONDS = 100_000_000;
const MAX_SECONDS = 9_223_372_036;
const MAX_NANOS_IN_LAST_SECOND = 854_775_807;

/** A point in time as whole seconds since the epoch and the nanoseconds past them (0..999,999,999). */
export interface EpochTime {
  seconds: number;
  nanos: number;
}

/**
 * Reads a timestamp into `into`; returns false (into unspecified) if it is not RFC 3339 with
 * a real calendar date and time, nor epoch nanoseconds, or lies outside
 * [MIN_EPOCH_NANOS, MAX_EPOCH_NANOS].
 */
export function readTimestamp(value: string | number, into: EpochTime): boolean {
  if (typeof value === 'number') return readEpochNumber(value, into);
  const length = value.length;
  if (length >= 1 && length <= 19 && allDigits(value, 0, length)) {
    // Epoch nanoseconds: the seconds are the digits before the last nine.
    const split = Math.max(0, length - 9);
    into.seconds = split === 0 ? 0 : digits(value, 0, split);
    into.nanos = digits(value, split, length);
  } else if (!readRfc3339(value, into)) {
    return false;
  }
  return inRange(into.seconds, into.nanos);
}

/** Epoch nanoseconds as a bigint, or undefined (see readTimestamp). */
export function parseTimestamp(value: string | number): bigint | undefined {
  const time: EpochTime = { seconds: 0, nanos: 0 };
  if (!readTimestamp(value, time)) return undefined;
  return BigInt(time.seconds) * 1_000_000_000n + BigInt(time.nanos);
}

function inRange(seconds: number, nanos: number): boolean {
  return seconds >= MIN_SECONDS && (seconds < MAX_SECONDS || (seconds === MAX_SECONDS && nanos <= MAX_NANOS_IN_LAST_SECOND));
}

/** A JSON number: exact only as a bigint past 2^53 (rare: agents are told to send strings). */
function readEpochNumber(value: number, into: EpochTime): boolean {
  if (!Number.isInteger(value)) return false;
  const nanos = BigInt(value);
  if (nanos < MIN_EPOCH_NANOS || nanos > MAX_EPOCH_NANOS) return false;
  into.seconds = Number(nanos / 1_000_000_000n);
  into.nanos = Number(nanos % 1_000_000_000n);
  return true;
}

const DAYS_IN_MONTH = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * YYYY-MM-DD(T|t| )HH:MM:SS[.fraction](Z|z|±HH:MM), every field in its calendar range (no
 * 2026-02-30, no 24:00:00, no leap second), offsets up to ±23:59.
 */
function readRfc3339(s: string, into: EpochTime): boolean {
  const length = s.length;
  if (length < 20 || s.charCodeAt(4) !== 0x2d || s.charCodeAt(7) !== 0x2d || s.charCodeAt(13) !== 0x3a || s.charCodeAt(16) !== 0x3a) return false;
  const separator = s.charCodeAt(10);
  if (separator !== 0x54 && separator !== 0x74 && separator !== 0x20) return false; // T t space
  // Each field is -1 if not all digits, which every range check below refuses.
  const century = twoDigits(s, 0);
  const yearInCentury = twoDigits(s, 2);
  const year = century < 0 || yearInCentury < 0 ? -1 : century * 100 + yearInCentury;
  const month = twoDigits(s, 5);
  const day = twoDigits(s, 8);
  const hour = twoDigits(s, 11);
  const minute = twoDigits(s, 14);
  const second = twoDigits(s, 17);
  if (year < 0 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59) return false;

  let at = 19;
  let nanos = 0;
  if (s.charCodeAt(at) === 0x2e) { // '.', then 1 to 9 digits
    const start = ++at;
    while (at < length && at - start < 10 && isDigit(s.charCodeAt(at))) at++;
    const count = at - start;
    if (count < 1 || count > 9) return false;
    nanos = digits(s, start, at) * 10 ** (9 - count);
  }

  let offsetSeconds = 0;
  const zone = s.charCodeAt(at);
  if (zone === 0x5a || zone === 0x7a) { // Z z
    if (at + 1 !== length) return false;
  } else if (zone === 0x2b || zone === 0x2d) { // + -
    const offsetHours = twoDigits(s, at + 1);
    const offsetMinutes = twoDigits(s, at + 4);
    if (at + 6 !== length || s.charCodeAt(at + 3) !== 0x3a || offsetHours < 0 || offsetHours > 23 || offsetMinutes < 0 || offsetMinutes > 59) return false;
    offsetSeconds = (zone === 0x2d ? -1 : 1) * (offsetHours * 3600 + offsetMinutes * 60);
  } else {
    return false;
  }
  into.seconds = daysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offsetSeconds;
  into.nanos = nanos;
  return true;
}

/** The two digits at s[at], s[at + 1] as a number, or -1 if either is not a digit (or is missing). */
function twoDigits(s: string, at: number): number {
  const high = s.charCodeAt(at) - 0x30;
  const low = s.charCodeAt(at + 1) - 0x30;
  // NaN (past the end) fails both comparisons.
  return high >= 0 && high <= 9 && low >= 0 && low <= 9 ? high * 10 + low : -1;
}

function daysInMonth(year: number, month: number): number {
  if (month !== 2) return DAYS_IN_MONTH[month]!;
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
}

/** Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146097 + dayOfEra - 719468;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function allDigits(s: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (!isDigit(s.charCodeAt(i))) return false;
  return true;
}

/** The decimal value of s[start, end), known to be at most 10 digits (exact as a double). */
function digits(s: string, start: number, end: number): number {
  let value = 0;
  for (let i = start; i < end; i++) value = value * 10 + (s.charCodeAt(i) - 0x30);
  return value;
}

/** The current time in epoch nanoseconds (millisecond precision). */
export function nowNanos(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}
