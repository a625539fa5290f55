import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Passwords are stored as `scrypt$N$r$p$salt$hash` (salt and hash base64): self-describing, so the cost can be
 * raised later while old hashes still verify. docs/console-api.md: N=2^15, r=8, p=1, a 16-byte salt. N comes
 * from PASSWORD_HASH_COST (its log2; config.ts allows a lower one only under NODE_ENV=test); a hash verifies at
 * the cost written in it, whatever the configured one.
 */
const costOf = (log2N: number) => ({ N: 2 ** log2N, r: 8, p: 1 }) as const;
const SALT_BYTES = 16;
const HASH_BYTES = 32;
/** scrypt needs 128·N·r bytes; Node's default ceiling (32 MiB) is exactly that for N=2^15, r=8, so leave room. */
const MAX_MEMORY = 256 * 1024 * 1024;
/** The highest cost a stored hash may ask for: a corrupted row must not make a sign-in allocate gigabytes. */
const MAX_N = 2 ** 20;

function derive(
  password: string,
  salt: Buffer,
  cost: ScryptOptions & { N: number },
  length: number,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, length, { ...cost, maxmem: MAX_MEMORY }, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });
}

export async function hashPassword(password: string, log2N: number): Promise<string> {
  const cost = costOf(log2N);
  const salt = randomBytes(SALT_BYTES);
  const hash = await derive(password, salt, cost, HASH_BYTES);
  return ['scrypt', cost.N, cost.r, cost.p, salt.toString('base64'), hash.toString('base64')].join('$');
}

interface StoredHash {
  cost: { N: number; r: number; p: number };
  salt: Buffer;
  hash: Buffer;
}

function parse(stored: string): StoredHash | null {
  const [scheme, n, r, p, salt, hash, ...rest] = stored.split('$');
  if (scheme !== 'scrypt' || rest.length > 0 || salt === undefined || hash === undefined) return null;
  const cost = { N: Number(n), r: Number(r), p: Number(p) };
  const powerOfTwo = Number.isSafeInteger(cost.N) && cost.N > 1 && (cost.N & (cost.N - 1)) === 0;
  if (
    !powerOfTwo ||
    cost.N > MAX_N ||
    ![cost.r, cost.p].every((v) => Number.isSafeInteger(v) && v >= 1 && v <= 16)
  ) {
    return null;
  }
  return { cost, salt: Buffer.from(salt, 'base64'), hash: Buffer.from(hash, 'base64') };
}

/** True when `password` is the one `stored` was made from; compared in constant time. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parsed = parse(stored);
  if (!parsed || parsed.hash.length === 0) return false;
  const candidate = await derive(password, parsed.salt, parsed.cost, parsed.hash.length);
  return timingSafeEqual(candidate, parsed.hash);
}

const decoys = new Map<number, Promise<string>>();

/**
 * Spends what a real check at the configured cost costs when there is nothing to check (no such organization,
 * person or password), so the time of a sign-in does not say which part was wrong. Always false.
 */
export async function verifyNothing(password: string, log2N: number): Promise<false> {
  let decoy = decoys.get(log2N);
  if (!decoy) {
    decoy = hashPassword(randomBytes(16).toString('hex'), log2N);
    decoys.set(log2N, decoy);
  }
  await verifyPassword(password, await decoy);
  return false;
}
