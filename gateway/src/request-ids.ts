import { randomFillSync } from 'node:crypto';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
const CROCKFORD_CODES = Buffer.from(CROCKFORD, 'latin1');
const POOL_SIZE = 16 * 1024;
const pool = Buffer.alloc(POOL_SIZE);
let offset = POOL_SIZE;
let timeMs = -1;
let timePart = '';

/**
 * `req_` + a ULID (lowercase Crockford base32: 10 time characters, 16 random), the shape admin accepts as a
 * forwarded id. Random bytes come from a pooled crypto buffer, turned into Crockford characters in place once per
 * 1,024 ids, so an id costs one slice; the time part is made once per millisecond.
 */
export function newRequestId(): string {
  if (offset + 16 > POOL_SIZE) {
    randomFillSync(pool);
    for (let i = 0; i < POOL_SIZE; i++) pool[i] = CROCKFORD_CODES[pool[i]! & 31]!;
    offset = 0;
  }
  const now = Date.now();
  if (now !== timeMs) {
    timeMs = now;
    let time = now;
    timePart = '';
    for (let i = 0; i < 10; i++) {
      timePart = CROCKFORD[time % 32] + timePart;
      time = Math.floor(time / 32);
    }
  }
  const randomPart = pool.toString('latin1', offset, offset + 16);
  offset += 16;
  return `req_${timePart}${randomPart}`;
}
