import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { assertSecretsKeyringUsable, type SecretsKey, type SecretsKeyring } from '@ent/common/crypto/keyring';

/**
 * Secrets the service must be able to read back (webhook signing secrets, live invite links) are stored
 * encrypted with AES-256-GCM, so a database dump alone does not reveal them. Stored form (base64url parts):
 * `v2.<key id>.<iv>.<tag>.<ciphertext>`, encrypted under the keyring's current key. The older
 * `v1.<iv>.<tag>.<ciphertext>` carries no key id: it is tried with the current key, then each previous one.
 * The context (e.g. `webhook:<org id>`) is bound as additional authenticated data, so a ciphertext copied to
 * another row does not decrypt.
 */
const IV_BYTES = 12;

export type { SecretsKeyring } from '@ent/common/crypto/keyring';

export function encryptSecret(plaintext: string, keyring: SecretsKeyring, context: string): string {
  assertSecretsKeyringUsable(keyring);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keyring.current.bytes(), iv);
  cipher.setAAD(Buffer.from(context));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v2', keyring.current.id, ...[iv, cipher.getAuthTag(), ciphertext].map((b) => b.toString('base64url'))].join(
    '.',
  );
}

function decryptWith(key: SecretsKey, iv: string, tag: string, ciphertext: string, context: string): string {
  const decipher = createDecipheriv('aes-256-gcm', key.bytes(), Buffer.from(iv, 'base64url'));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
}

export function decryptSecret(stored: string, keyring: SecretsKeyring, context: string): string {
  assertSecretsKeyringUsable(keyring);
  const parts = stored.split('.');
  const keys = [keyring.current, ...keyring.previous];
  let candidates: SecretsKey[];
  let body: string[];
  if (parts[0] === 'v2' && parts.length === 5) {
    candidates = keys.filter((key) => key.id === parts[1]);
    if (candidates.length === 0) {
      throw new Error(`secret was encrypted with key id ${parts[1]}, which is in neither SECRETS_KEY nor SECRETS_KEY_PREVIOUS`);
    }
    body = parts.slice(2);
  } else if (parts[0] === 'v1' && parts.length === 4) {
    candidates = keys;
    body = parts.slice(1);
  } else {
    throw new Error('unrecognised encrypted secret');
  }
  const [iv, tag, ciphertext] = body as [string, string, string];
  for (const key of candidates) {
    try {
      return decryptWith(key, iv, tag, ciphertext, context);
    } catch {
      // GCM authentication failed: not this key (or not this context); try the next.
    }
  }
  throw new Error('secret does not decrypt with any key in SECRETS_KEY / SECRETS_KEY_PREVIOUS (or its context differs)');
}

/** True when `stored` is already in the current form under the current key (rotation leaves it alone). */
export const isEncryptedWithCurrentKey = (stored: string, keyring: SecretsKeyring): boolean => {
  const parts = stored.split('.');
  return parts.length === 5 && parts[0] === 'v2' && parts[1] === keyring.current.id;
};

/** For one-way lookups of bearer tokens (invite links): only the hash is searchable. */
export const sha256Hex = (value: string): string => createHash('sha256').update(value).digest('hex');

/** URL-safe random token of `bytes` random bytes. */
export const randomToken = (bytes = 32): string => randomBytes(bytes).toString('base64url');
