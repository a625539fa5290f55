/**
 * Deepest nesting of objects and arrays a request body may have. The deepest body the API defines is three
 * levels (a plan's grants: object, array, object); the margin leaves room for future shapes, while every
 * recursive walk over a parsed body (validation, NUL checks, audit details) stays far from the stack limit.
 */
export const MAX_JSON_DEPTH = 32;

const OPEN_OBJECT = 0x7b; // {
const OPEN_ARRAY = 0x5b; // [
const CLOSE_OBJECT = 0x7d; // }
const CLOSE_ARRAY = 0x5d; // ]
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \

/**
 * Whether JSON text nests objects and arrays deeper than `maxDepth`, read in one pass with a counter (no
 * recursion, nothing parsed), so a hostile body is refused before `JSON.parse` or any recursive walk sees it.
 * Brackets inside strings are skipped; malformed text is left for the parser to refuse.
 */
export function exceedsJsonDepth(text: string, maxDepth = MAX_JSON_DEPTH): boolean {
  // Too short to open more than maxDepth brackets (an eval's body, say): nothing to read.
  if (text.length <= maxDepth) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      depth++;
      if (depth > maxDepth) return true;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      depth--;
    }
  }
  return false;
}
