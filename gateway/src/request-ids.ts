import { randomFillSync } from 'node:crypto';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
const POOL_SIZE = 16 * 1024;
const pool = Buffer.alloc(POOL_SIZE);
let offset = POOL_SIZE;

/**
 * `req_` + a ULID (lowercase Crockford base32: 10 time characters, 16 random), the shape admin accepts as a
 * forwarded id. Random bytes come from a pooled crypto buffer: one randomFillSync per 1,024 ids, not per id.
 */
export function newRequestId(): string {
  if (offset + 16 > POOL_SIZE) {
    randomFillSync(pool);
    offset = 0;
  }
  let time = Date.now();
  let timePart = '';
  for (let i = 0; i < 10; i++) {
    timePart = CROCKFORD[time % 32] + timePart;
    time = Math.floor(time / 32);
  }
  let randomPart = '';
  for (let i = 0; i < 16; i++) randomPart += CROCKFORD[pool[offset + i]! & 31];
  offset += 16;
  return `req_${timePart}${randomPart}`;
}
