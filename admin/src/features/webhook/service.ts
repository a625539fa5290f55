import type { Kysely } from 'kysely';
import type { Database, Webhook, WebhookDelivery } from '@ent/common/db/database';
import { notFound, validationError } from '@ent/common/errors/app-error';
import type { PutWebhookBody } from '@ent/contract/webhook';
import { transact } from '@ent/common/outbox/record';
import { decryptSecret, encryptSecret, type SecretsKeyring } from '../../crypto/secrets.ts';
import { changedFields } from '../shared/changes.ts';
import { generateWebhookSecret, secretPrefixOf } from './signing.ts';
import { TargetRefusedError, assertPublicTarget } from './targets.ts';
import {
  cancelQueuedDeliveries,
  findDelivery,
  findWebhook,
  insertWebhook,
  listDeliveries,
  lockWebhook,
  updateWebhookRow,
  type DeliveryListFilter,
} from './store.ts';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';
import { withOrganizationLocked } from '../shared/write/locks.ts';
import type { WriteOutcome } from '../shared/write/outcome.ts';

/** A webhook URL `validateWebhookUrl` accepted (and normalised). */
export type ValidatedWebhookUrl = string & { readonly __validated: true };

/** After a rotation the previous secret keeps signing (a second signature) for this long. */
const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;

export interface WebhookSettings {
  secretsKey: SecretsKeyring;
  allowPrivateTargets: boolean;
}

export const webhookNotFound = () => notFound('No webhook is configured; create it with PUT /org/webhook.');

/** The organization's webhook, or undefined when none is configured (an answer, not an error, for the console). */
export const findOrganizationWebhook = (
  db: Kysely<Database>,
  organizationId: string,
): Promise<Webhook | undefined> => findWebhook(db, organizationId);

export const secretContext = (organizationId: string) => `webhook:${organizationId}`;
const encryptWebhookSecret = (
  secret: string,
  settings: Pick<WebhookSettings, 'secretsKey'>,
  organizationId: string,
) => encryptSecret(secret, settings.secretsKey, secretContext(organizationId));

/** Whether the secret replaced by the last rotation still signs deliveries at `now` (its overlap). */
export const previousSecretSigns = (webhook: Webhook, now: Date): boolean =>
  webhook.previous_secret_expires_at !== null && webhook.previous_secret_expires_at > now;

/** The secrets that sign a delivery at `now`: the current one, and the previous one during the overlap. */
export function signingSecrets(webhook: Webhook, secretsKey: SecretsKeyring, now: Date): string[] {
  const context = secretContext(webhook.organization_id);
  const secrets = [decryptSecret(webhook.secret_ciphertext, secretsKey, context)];
  if (webhook.previous_secret_ciphertext && previousSecretSigns(webhook, now)) {
    secrets.push(decryptSecret(webhook.previous_secret_ciphertext, secretsKey, context));
  }
  return secrets;
}

/** http(s), no credentials in the URL, and (unless allowed) not a private or loopback address. */
export async function validateWebhookUrl(
  raw: string,
  allowPrivateTargets: boolean,
): Promise<ValidatedWebhookUrl> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw validationError('url must be an absolute http or https URL.', { field: 'url', value: raw });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw validationError('url must use http or https.', { field: 'url', value: raw });
  }
  if (url.username || url.password) {
    throw validationError('url must not carry credentials.', { field: 'url', value: raw });
  }
  if (!allowPrivateTargets) {
    try {
      await assertPublicTarget(url);
    } catch (error) {
      if (error instanceof TargetRefusedError) {
        throw validationError('url points at a private or loopback address.', { field: 'url', value: raw });
      }
      // A name that does not resolve yet is accepted; every delivery checks the address again.
    }
  }
  return url.toString() as ValidatedWebhookUrl;
}

/**
 * A webhook URL as the audit log records it: receivers often take a token in the query string, and the log is
 * append-only (SPEC.md: entries hold no query strings and no secrets), so the query and fragment are left out.
 */
function auditableWebhookUrl(url: string): string {
  const parsed = new URL(url);
  const redacted = parsed.search || parsed.hash ? '?[redacted]' : '';
  return `${parsed.origin}${parsed.pathname}${redacted}`;
}

export interface PutWebhookResult {
  webhook: Webhook;
  /** Set only when the webhook was created: the signing secret, shown once. */
  secret: string | null;
}

/**
 * Creates or changes the webhook. `url` is what `validateWebhookUrl` made of the body's: checked (a DNS lookup)
 * before the write's transaction, which would otherwise hold its connection while the name resolves.
 */
export async function putWebhook(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  settings: WebhookSettings,
  organizationId: string,
  input: PutWebhookBody & { url: ValidatedWebhookUrl },
  now: Date,
): Promise<PutWebhookResult> {
  const { url } = input;
  // The organization first: two first PUTs at once would both find no webhook and race to insert one.
  return withOrganizationLocked(db, organizationId, async (trx) => {
    const before = await lockWebhook(trx, organizationId);
    if (!before) {
      const secret = generateWebhookSecret();
      const webhook = await insertWebhook(trx, {
        organizationId,
        url,
        secretCiphertext: encryptWebhookSecret(secret, settings, organizationId),
        secretPrefix: secretPrefixOf(secret),
        disabled: input.disabled ?? false,
        now,
      });
      outcome.details = { url: auditableWebhookUrl(webhook.url), secret_prefix: webhook.secret_prefix };
      return { webhook, secret };
    }
    const changes = changedFields(before, { url, disabled: input.disabled }, ['url', 'disabled']);
    if (!changes) return { webhook: before, secret: null };
    const details = changes.url
      ? { ...changes, url: { from: auditableWebhookUrl(before.url), to: auditableWebhookUrl(url) } }
      : changes;
    const disabled = input.disabled ?? before.disabled;
    if (before.disabled && !disabled) await cancelQueuedDeliveries(trx, organizationId, now);
    const webhook = await updateWebhookRow(trx, organizationId, {
      url,
      disabled,
      disabled_reason: disabled ? before.disabled_reason : null,
      updated_at: now,
    });
    outcome.details = details;
    return { webhook, secret: null };
  });
}

export interface RotateResult {
  webhook: Webhook;
  secret: string;
}

/** A new secret; the current one becomes the previous secret and keeps signing for 24 hours. */
export async function rotateWebhookSecret(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  settings: WebhookSettings,
  organizationId: string,
  now: Date,
): Promise<RotateResult> {
  return transact(db, async (trx) => {
    const before = await lockWebhook(trx, organizationId);
    if (!before) throw webhookNotFound();
    const secret = generateWebhookSecret();
    const webhook = await updateWebhookRow(trx, organizationId, {
      secret_ciphertext: encryptWebhookSecret(secret, settings, organizationId),
      secret_prefix: secretPrefixOf(secret),
      previous_secret_ciphertext: before.secret_ciphertext,
      previous_secret_expires_at: new Date(now.getTime() + ROTATION_OVERLAP_MS),
      updated_at: now,
    });
    outcome.details = { secret_prefix: { from: before.secret_prefix, to: webhook.secret_prefix } };
    return { webhook, secret };
  });
}

export async function setWebhookDisabled(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  disabled: boolean,
  now: Date,
): Promise<Webhook> {
  return transact(db, async (trx) => {
    const before = await lockWebhook(trx, organizationId);
    if (!before) throw webhookNotFound();
    if (before.disabled === disabled) return before;
    if (!disabled) await cancelQueuedDeliveries(trx, organizationId, now);
    const webhook = await updateWebhookRow(trx, organizationId, {
      disabled,
      disabled_reason: null,
      updated_at: now,
    });
    outcome.details = { disabled: { from: before.disabled, to: disabled } };
    return webhook;
  });
}

/** The organization's webhook deliveries, newest first, one page. */
export function listWebhookDeliveries(
  db: Kysely<Database>,
  organizationId: string,
  request: PageRequest<DeliveryListFilter>,
): Promise<Page<WebhookDelivery>> {
  return paginate(
    request,
    {
      find: async (id) => (await findDelivery(db, id))?.organization_id === organizationId,
      what: 'a delivery of this organization',
    },
    (filter) => listDeliveries(db, organizationId, filter),
  );
}
