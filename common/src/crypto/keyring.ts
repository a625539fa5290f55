import { createHash } from 'node:crypto';
import { isLoopbackHost } from '../http/loopback.ts';

/** Committed in the source, so it protects nothing: used only on a loopback HOST outside production. */
const DEV_SECRETS_KEY = 'ZW50aXRsZW1lbnRzLWRldmVsb3BtZW50LWtleS0wMDA='; // 32 bytes

const HEX_KEY = /^[0-9a-fA-F]{64}$/;
// 32 bytes are 43 base64 characters plus one optional '='; standard or URL-safe alphabet.
const BASE64_KEY = /^(?:[A-Za-z0-9+/]{43}|[A-Za-z0-9_-]{43})=?$/;

/** One 32-byte key and its id. The bytes sit in a private field, so logging a config never prints them. */
export class SecretsKey {
  readonly id: string;
  readonly #bytes: Buffer;

  constructor(bytes: Buffer) {
    if (bytes.length !== 32) throw new Error('a secrets key is 32 bytes');
    this.#bytes = Buffer.from(bytes);
    // Derived from the key, so operators never name keys and an id can never point at the wrong key.
    this.id = createHash('sha256').update('entitlements-secrets-key-id\0').update(bytes).digest('hex').slice(0, 8);
  }

  bytes(): Buffer {
    return this.#bytes;
  }
}

export interface SecretsKeyring {
  /** Encrypts everything new; `entctl secrets rotate` moves old ciphertexts to it. */
  readonly current: SecretsKey;
  /** Still decrypt (until rotated away), never encrypt. */
  readonly previous: readonly SecretsKey[];
  /** Why this keyring may not be used (the development key outside development); every use throws it. */
  readonly refusal: string | null;
}

/** 32 bytes as 64 hex characters or base64 (standard or URL-safe, padding optional); anything else throws. */
export function parseSecretsKey(raw: string, name = 'SECRETS_KEY'): SecretsKey {
  const trimmed = raw.trim();
  if (HEX_KEY.test(trimmed)) return new SecretsKey(Buffer.from(trimmed, 'hex'));
  if (BASE64_KEY.test(trimmed)) {
    return new SecretsKey(Buffer.from(trimmed, /[-_]/.test(trimmed) ? 'base64url' : 'base64'));
  }
  throw new Error(
    `${name} must be 32 bytes, as 64 hex characters or base64 (generate one with: openssl rand -base64 32)`,
  );
}

export interface SecretsKeyEnv {
  SECRETS_KEY?: string;
  /** Comma-separated older keys, still read until `entctl secrets rotate` has re-encrypted everything. */
  SECRETS_KEY_PREVIOUS?: string;
  NODE_ENV?: string;
}

export function secretsKeyringFromEnv(env: SecretsKeyEnv, host: string): SecretsKeyring {
  const previousRaw = (env.SECRETS_KEY_PREVIOUS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const configured = Boolean(env.SECRETS_KEY?.trim());
  if (!configured && previousRaw.length > 0) {
    throw new Error('SECRETS_KEY_PREVIOUS is set but SECRETS_KEY is not: set SECRETS_KEY to the new key');
  }
  const current = parseSecretsKey(configured ? (env.SECRETS_KEY as string) : DEV_SECRETS_KEY);
  const previous: SecretsKey[] = [];
  for (const raw of previousRaw) {
    const key = parseSecretsKey(raw, 'SECRETS_KEY_PREVIOUS');
    if (key.bytes().equals(current.bytes()) || previous.some((p) => p.bytes().equals(key.bytes()))) continue;
    if (key.id === current.id || previous.some((p) => p.id === key.id)) {
      throw new Error('two keys in SECRETS_KEY / SECRETS_KEY_PREVIOUS share a key id; generate another key');
    }
    previous.push(key);
  }
  const developmentAllowed = isLoopbackHost(host) && env.NODE_ENV !== 'production';
  const refusal =
    configured || developmentAllowed
      ? null
      : `SECRETS_KEY is not set. The development key committed in the source is used only when HOST is a loopback ` +
        `address and NODE_ENV is not "production" (HOST is "${host}", NODE_ENV is "${env.NODE_ENV ?? ''}"). ` +
        'Set SECRETS_KEY to 32 random bytes: openssl rand -base64 32';
  return { current, previous, refusal };
}

/** Called at startup by every process that encrypts or decrypts (admin, worker, entctl): fails fast. */
export function assertSecretsKeyringUsable(keyring: SecretsKeyring): void {
  if (keyring.refusal) throw new Error(keyring.refusal);
}

/** A keyring from explicit keys (tests, tools): the first is current. */
export const keyringOf = (current: string, ...previous: string[]): SecretsKeyring =>
  secretsKeyringFromEnv({ SECRETS_KEY: current, SECRETS_KEY_PREVIOUS: previous.join(',') }, '127.0.0.1');
