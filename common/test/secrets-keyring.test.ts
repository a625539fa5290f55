import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { keyringOf, parseSecretsKey } from '../src/crypto/keyring.ts';
import { decryptSecret, encryptSecret, isEncryptedWithCurrentKey } from '../../admin/src/crypto/secrets.ts';

const OLD = '6c'.repeat(32);
const NEW = randomBytes(32).toString('base64');
// Written by the v1 code (before key ids) under OLD, context 'webhook:org_legacy'.
const V1_CIPHERTEXT = 'v1.6F8qtKFlfMA_OzXq.WEySH_2XvFDu-7Z4z6-XGg.qXKo25_xRiinwTbYBee9_0_eJQ';
const V1_PLAINTEXT = 'whsec_legacy-secret';

describe('secrets keyring', () => {
  it('encrypts under the current key and names it in the ciphertext', () => {
    const keyring = keyringOf(NEW, OLD);
    const stored = encryptSecret('s3cret', keyring, 'ctx');
    const [version, kid] = stored.split('.');
    expect(version).toBe('v2');
    expect(kid).toBe(keyring.current.id);
    expect(kid).toMatch(/^[0-9a-f]{8}$/);
    expect(stored.split('.')).toHaveLength(5);
    expect(decryptSecret(stored, keyring, 'ctx')).toBe('s3cret');
    expect(isEncryptedWithCurrentKey(stored, keyring)).toBe(true);
  });

  it('derives the same key id from the same key, whether given as hex or base64', () => {
    const bytes = randomBytes(32);
    expect(parseSecretsKey(bytes.toString('hex')).id).toBe(parseSecretsKey(bytes.toString('base64')).id);
    expect(parseSecretsKey(bytes.toString('base64url')).id).toBe(parseSecretsKey(bytes.toString('base64')).id);
  });

  it('still reads v1 ciphertexts, with the current key or a previous one', () => {
    expect(decryptSecret(V1_CIPHERTEXT, keyringOf(OLD), 'webhook:org_legacy')).toBe(V1_PLAINTEXT);
    const rotated = keyringOf(NEW, OLD);
    expect(decryptSecret(V1_CIPHERTEXT, rotated, 'webhook:org_legacy')).toBe(V1_PLAINTEXT);
    expect(isEncryptedWithCurrentKey(V1_CIPHERTEXT, rotated)).toBe(false);
  });

  it('fails with the wrong key, a key id not in the ring, or another context', () => {
    const stored = encryptSecret('s3cret', keyringOf(OLD), 'ctx');
    expect(() => decryptSecret(stored, keyringOf(NEW), 'ctx')).toThrow(/key id .* neither SECRETS_KEY nor SECRETS_KEY_PREVIOUS/);
    expect(() => decryptSecret(stored, keyringOf(OLD), 'other')).toThrow(/does not decrypt/);
    expect(() => decryptSecret(V1_CIPHERTEXT, keyringOf(NEW), 'webhook:org_legacy')).toThrow(/does not decrypt/);
    const tampered = stored.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
    expect(() => decryptSecret(tampered, keyringOf(OLD), 'ctx')).toThrow();
    expect(() => decryptSecret('v3.x.y', keyringOf(OLD), 'ctx')).toThrow('unrecognised encrypted secret');
  });

  it('rotation: after the new key is current, old ciphertexts read through the previous key and re-encrypt to the new one', () => {
    const before = encryptSecret('s3cret', keyringOf(OLD), 'ctx');
    const during = keyringOf(NEW, OLD);
    expect(isEncryptedWithCurrentKey(before, during)).toBe(false);
    const reencrypted = encryptSecret(decryptSecret(before, during, 'ctx'), during, 'ctx');
    expect(isEncryptedWithCurrentKey(reencrypted, during)).toBe(true);
    // The old key removed: what was re-encrypted still reads, what was not does not.
    const after = keyringOf(NEW);
    expect(decryptSecret(reencrypted, after, 'ctx')).toBe('s3cret');
    expect(() => decryptSecret(before, after, 'ctx')).toThrow();
  });

  it('refuses keys that are not 32 bytes', () => {
    for (const bad of ['', 'short', 'ab'.repeat(31), 'ab'.repeat(33), randomBytes(31).toString('base64'), `${'A'.repeat(43)}!`]) {
      expect(() => parseSecretsKey(bad), JSON.stringify(bad)).toThrow('SECRETS_KEY must be 32 bytes');
    }
  });

  it('never prints key bytes when a keyring is logged', () => {
    const keyring = keyringOf(OLD);
    expect(JSON.stringify(keyring)).not.toContain('6c6c');
    expect(JSON.stringify(keyring)).not.toContain(Buffer.from(OLD, 'hex').toString('base64'));
  });
});
