/** Longest RFC 3339 value accepted: 9 fraction digits and a numeric offset fit (35 characters) with room. */
const MAX_DATE_TIME_LENGTH = 40;

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

const isLeapYear = (year: number): boolean => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * The instant of an RFC 3339 date-time, in ms. The date and time are joined with `T` first: with a space V8 falls
 * back to its legacy parser, which reads years 0000-0099 as 19xx/20xx (`0050-01-01 00:00:00Z` became 1950).
 */
export function parseDateTime(value: string): number {
  return Date.parse(value.replace(/^(\d{4}-\d{2}-\d{2})[Tt ]/, '$1T').replace(/z$/, 'Z'));
}

/**
 * RFC 3339 date-time that names one instant JavaScript can represent. Stricter than ajv-formats on purpose:
 * a leap second (`:60`) is refused (Date.parse gives NaN for it, which the audit query could not use: a 500),
 * as are impossible dates, offsets beyond ±23:59, more than nanosecond precision, and instants outside the
 * UTC years 0000-9999. `-00:00` is UTC, as in RFC 3339.
 */
export function isDateTime(value: string): boolean {
  if (value.length > MAX_DATE_TIME_LENGTH) return false;
  const match = RFC3339.exec(value);
  if (!match) return false;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return false;
  if (hour > 23 || minute > 59 || second > 59) return false;
  if (match[7] !== undefined && (Number(match[7]) > 23 || Number(match[8]) > 59)) return false;
  const instant = parseDateTime(value);
  if (!Number.isFinite(instant)) return false;
  // The written year is 0000-9999, but the offset can carry the instant past either end: such an instant has no
  // four-digit UTC form to answer with (toISOString gives `+010000-…`, which every response schema refuses).
  const utcYear = new Date(instant).getUTCFullYear();
  return utcYear >= 0 && utcYear <= 9999;
}
