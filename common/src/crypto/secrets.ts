import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Secrets the service must be able to read back (webhook signing secrets, live invite links) are stored
 * encrypted with AES-256-GCM under `config.secretsKey`, so a database dump alone does not reveal them.
 * Stored form: `v1.<iv>.<tag>.<ciphertext>` (base64url). The context (e.g. `webhook:<org id>`) is bound as
 * additional authenticated data, so a ciphertext copied to another row does not decrypt.
 */
const VERSION = 'v1';
const IV_BYTES = 12;

export function parseSecretsKey(raw: string): Buffer {
  const trimmed = raw.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, 'hex')
    : Buffer.from(trimmed, 'base64');
  if (key.length !== 32) throw new Error('SECRETS_KEY must be 32 bytes, as 64 hex characters or base64');
  return key;
}

export function encryptSecret(plaintext: string, secretsKey: string, context: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', parseSecretsKey(secretsKey), iv);
  cipher.setAAD(Buffer.from(context));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return [VERSION, iv, cipher.getAuthTag(), ciphertext]
    .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
    .join('.');
}

export function decryptSecret(stored: string, secretsKey: string, context: string): string {
  const [version, iv, tag, ciphertext] = stored.split('.');
  if (version !== VERSION || iv === undefined || tag === undefined || ciphertext === undefined) {
    throw new Error('unrecognised encrypted secret');
  }
  const decipher = createDecipheriv('aes-256-gcm', parseSecretsKey(secretsKey), Buffer.from(iv, 'base64url'));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString(
    'utf8',
  );
}

/** For one-way lookups of bearer tokens (invite links): only the hash is searchable. */
export const sha256Hex = (value: string): string => createHash('sha256').update(value).digest('hex');

/** URL-safe random token of `bytes` random bytes. */
export const randomToken = (bytes = 32): string => randomBytes(bytes).toString('base64url');
