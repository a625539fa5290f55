/** How the console writes times and numbers: one place, so every table agrees. */
// In the browser's zone, named (PST, GMT+2): a period or an expiry the service keeps in UTC reads unambiguously.
const dateTime = new Intl.DateTimeFormat(undefined, {
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: 'numeric',
  minute: '2-digit',
  timeZoneName: 'short',
});
const integer = new Intl.NumberFormat();

export const formatTime = (iso: string | null | undefined): string =>
  iso ? dateTime.format(new Date(iso)) : '—';

export const formatCount = (value: number): string => integer.format(value);

export const formatLimit = (limit: number | null | undefined): string =>
  limit === null || limit === undefined ? 'unlimited' : integer.format(limit);

/** `1 entry`, `2 entries`: the count and the word that fits it. */
export const counted = (count: number, one: string, many = `${one}s`): string =>
  `${integer.format(count)} ${count === 1 ? one : many}`;
