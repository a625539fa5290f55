import type { Kysely } from 'kysely';
import type { Role } from '@ent/common/auth/scopes';
import {
  decryptSecret,
  encryptSecret,
  randomToken,
  sha256Hex,
  type SecretsKeyring,
} from '@ent/common/crypto/secrets';
import type { Database, Invite, Member } from '@ent/common/db/database';
import { conflict, notFound } from '@ent/common/errors/app-error';
import { newId } from '@ent/common/ids';
import type { CreateInviteBody } from '@ent/common/schemas/invites';
import { bumpAuthVersion } from '../shared/versions.ts';
import { insertMember } from '../members/store.ts';
import { acceptInviteRow, findInvite, insertInvite, listLiveInvites, revokeInviteRow } from './store.ts';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';

export const INVITE_TTL_MS = 7 * 24 * 60 * 60 * 1000;
/** Where the console serves its join page; the link carries the single-use token. */

export interface InviteSettings {
  secretsKey: SecretsKeyring;
  consoleUrl: string;
}

export const tokenContext = (inviteId: string) => `invite:${inviteId}`;

export const inviteUrl = (consoleUrl: string, token: string): string =>
  `${consoleUrl.replace(/\/+$/, '')}/join/${encodeURIComponent(token)}`;

/** The link of a live invite, decrypted from its stored ciphertext. */
export function inviteLinkOf(invite: Invite, settings: InviteSettings): string {
  if (!invite.token_ciphertext) throw new Error(`invite ${invite.id} has no stored token`);
  return inviteUrl(
    settings.consoleUrl,
    decryptSecret(invite.token_ciphertext, settings.secretsKey, tokenContext(invite.id)),
  );
}

export async function createInvite(
  db: Kysely<Database>,
  settings: InviteSettings,
  organizationId: string,
  createdByMemberId: string,
  input: CreateInviteBody,
  now: Date,
): Promise<Invite> {
  const id = newId('inv');
  const token = randomToken(32);
  return insertInvite(db, {
    id,
    organizationId,
    role: input.role,
    email: input.email?.toLowerCase() ?? null,
    tokenHash: sha256Hex(token),
    tokenCiphertext: encryptSecret(token, settings.secretsKey, tokenContext(id)),
    createdByMemberId,
    expiresAt: new Date(now.getTime() + INVITE_TTL_MS),
    createdAt: now,
  });
}

/** Revokes a live invite; revoking one that was revoked or has expired changes nothing. */
export async function revokeInvite(
  db: Kysely<Database>,
  organizationId: string,
  inviteId: string,
  now: Date,
): Promise<boolean> {
  const invite = await findInvite(db, organizationId, inviteId);
  if (!invite) throw notFound(`No invite with id "${inviteId}".`, { field: 'invite_id', value: inviteId });
  if (invite.accepted_at)
    throw conflict('The invite has already been accepted.', { field: 'invite_id', value: inviteId });
  return (await revokeInviteRow(db, inviteId, now)) && invite.expires_at > now;
}

/**
 * Joining with an invite (the console's sign-up page calls this): the token is used once, atomically,
 * and only before it expires. Returns the new member.
 */
export async function redeemInvite(
  db: Kysely<Database>,
  token: string,
  joiner: { email: string; name?: string },
  now: Date,
): Promise<Member> {
  return db.transaction().execute(async (trx) => {
    const invite = await acceptInviteRow(trx, sha256Hex(token), now);
    if (!invite) throw notFound('The invite link is invalid, expired, revoked or already used.');
    const email = (invite.email ?? joiner.email).toLowerCase();
    const member = await insertMember(trx, invite.organization_id, {
      email,
      name: joiner.name ?? null,
      role: invite.role as Role,
    });
    await bumpAuthVersion(trx, invite.organization_id);
    return member;
  });
}

/** The organization's live invites (not accepted, revoked or expired at `now`), newest first, one page. */
export function listInvites(
  db: Kysely<Database>,
  organizationId: string,
  now: Date,
  request: PageRequest<{ limit: number; startingAfter?: string | undefined }>,
): Promise<Page<Invite>> {
  return paginate(
    request,
    { find: (id) => findInvite(db, organizationId, id), what: 'an invite of this organization' },
    (filter) => listLiveInvites(db, organizationId, now, filter),
  );
}
