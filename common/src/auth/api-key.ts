import { createHash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { toBase62 } from './base62.ts';

const API_KEY_PREFIX = 'svc-mk-1-';
const SECRET_LENGTH = 43; // 32 random bytes in base62
const CHECKSUM_LENGTH = 6;
const KEY_PATTERN = new RegExp(`^${API_KEY_PREFIX}[0-9A-Za-z]{${SECRET_LENGTH + CHECKSUM_LENGTH}}$`);

function checksum(secret: string): string {
  const value = crc32(Buffer.from(secret));
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(value);
  return toBase62(bytes, CHECKSUM_LENGTH);
}

export interface GeneratedApiKey {
  plaintext: string;
  /** `svc-mk-1-` and the first 8 characters of the secret: what lists and audit entries show. */
  prefix: string;
  hash: string;
}

export function generateApiKey(): GeneratedApiKey {
  const secret = toBase62(randomBytes(32), SECRET_LENGTH);
  const plaintext = `${API_KEY_PREFIX}${secret}${checksum(secret)}`;
  return { plaintext, prefix: keyPrefixOf(plaintext), hash: hashApiKey(plaintext) };
}

/** Offline check of shape and CRC32 checksum, so a mistyped key is refused before any lookup. */
export function isWellFormedApiKey(candidate: string): boolean {
  if (!KEY_PATTERN.test(candidate)) return false;
  const body = candidate.slice(API_KEY_PREFIX.length);
  const secret = body.slice(0, SECRET_LENGTH);
  return checksum(secret) === body.slice(SECRET_LENGTH);
}

export const hashApiKey = (plaintext: string): string => createHash('sha256').update(plaintext).digest('hex');

export const keyPrefixOf = (plaintext: string): string => plaintext.slice(0, API_KEY_PREFIX.length + 8);
