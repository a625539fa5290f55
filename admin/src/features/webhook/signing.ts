import { createHmac, randomBytes } from 'node:crypto';

/** Standard Webhooks (https://www.standardwebhooks.com): secrets are `whsec_` + base64 of random bytes. */
const SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 32;
const SHOWN_SECRET_CHARS = 8;

export const generateWebhookSecret = (): string =>
  `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;

/** What reads and audit entries show: `whsec_` and the first 8 characters. */
export const secretPrefixOf = (secret: string): string =>
  secret.slice(0, SECRET_PREFIX.length + SHOWN_SECRET_CHARS);

/** `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, keyed with the base64-decoded part after `whsec_`. */
function signatureOf(secret: string, messageId: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  const digest = createHmac('sha256', key)
    .update(`${messageId}.${timestampSeconds}.${body}`)
    .digest('base64');
  return `v1,${digest}`;
}

/** The `webhook-signature` header: one signature per valid secret, space-separated (rotation overlap). */
export const signatureHeader = (
  secrets: string[],
  messageId: string,
  timestampSeconds: number,
  body: string,
): string => secrets.map((secret) => signatureOf(secret, messageId, timestampSeconds, body)).join(' ');
