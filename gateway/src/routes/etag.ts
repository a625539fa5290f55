import { createHash } from 'node:crypto';

/**
 * A strong ETag of the serialized body itself: it changes with anything that changes the answer (catalog or
 * subscriber version, the query, an override expiring without any version change) and is the same on every
 * gateway for the same bytes, so a client may revalidate against any of them.
 */
export const strongEtag = (body: string): string =>
  `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;

/** RFC 9110 §13.1.2: `*` or a list of tags, compared weakly (a `W/` prefix is ignored). */
export function ifNoneMatchMatches(header: string | string[] | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const value = Array.isArray(header) ? header.join(',') : header;
  for (const raw of value.split(',')) {
    const tag = raw.trim();
    if (tag === '*') return true;
    if ((tag.startsWith('W/') ? tag.slice(2) : tag) === etag) return true;
  }
  return false;
}
