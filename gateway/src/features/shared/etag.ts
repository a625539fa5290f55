import { createHash } from 'node:crypto';

/**
 * A strong ETag of the serialized body itself: it changes with anything that changes the answer (catalog or
 * subscriber version, the query, an override expiring without any version change) and is the same on every
 * gateway for the same bytes, so a client may revalidate against any of them.
 */
export const strongEtag = (body: string): string =>
  `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;

/** Where a shared answer's ETag is kept beside the answer (entries.ts `serialized`). */
export const ETAG_KEY = '\u0000etag';

/**
 * The strong ETag of a body made of a per-request part and a shared part whose ETag is already known (a list
 * that names its subscriber around a plan set's shared list): the SHA-256 of the two, so a long shared body is
 * hashed once, not per request, and the tag still changes with either part.
 */
export const etagOfParts = (own: string, sharedEtag: string): string =>
  strongEtag(`${own}\u0000${sharedEtag}`);

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
