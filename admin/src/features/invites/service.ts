import type { Kysely, Transaction } from 'kysely';
import type { Principal, Role } from '@ent/common/auth/scopes';
import type { Database, Invite } from '@ent/common/db/database';
import { conflict, notFound, validationError } from '@ent/common/errors/app-error';
import { newId } from '@ent/common/ids';
import type { InviteStatus } from '@ent/contract/console';
import type { CreateInviteBody } from '@ent/contract/invites';
import {
  decryptSecret,
  encryptSecret,
  randomToken,
  sha256Hex,
  type SecretsKeyring,
} from '../../crypto/secrets.ts';
import { assertMayGrant } from '../shared/rights.ts';
import { lockOrganization, withCallerConfirmed } from '../shared/write/locks.ts';
import type { WriteOutcome } from '../shared/write/outcome.ts';
import {
  acceptInviteRow,
  findInvite,
  findInviteByTokenHash,
  insertInvite,
  listLiveInvites,
  revokeInviteRow,
  revokeInviteRowsMadeBy,
} from './store.ts';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';

export const INVITE_TTL_MS = 7 * 24 * 60 * 60 * 1000;

export interface InviteSettings {
  secretsKey: SecretsKeyring;
  /** The console's base URL as the caller sees it (invites/routes.ts, consoleUrlFor). */
  consoleUrl: string;
}

export const tokenContext = (inviteId: string) => `invite:${inviteId}`;

/** The console's join page (`<console>/join/<token>`); the link carries the token. */
/** The console on this machine's gateway: where links point when neither CONSOLE_URL nor a request names a host. */
export const localConsoleUrl = (gatewayPort: number): string => `http://localhost:${gatewayPort}/console`;

const inviteUrl = (consoleUrl: string, token: string): string =>
  `${consoleUrl.replace(/\/+$/, '')}/join/${encodeURIComponent(token)}`;

/** The link of a live invite, decrypted from its stored ciphertext. */
export function inviteLinkOf(invite: Invite, settings: InviteSettings): string {
  if (!invite.token_ciphertext) throw new Error(`invite ${invite.id} has no stored token`);
  return inviteUrl(
    settings.consoleUrl,
    decryptSecret(invite.token_ciphertext, settings.secretsKey, tokenContext(invite.id)),
  );
}

/**
 * Whoever joins holds everything the role allows, so the inviter must hold all of it (DESIGN.md §2.10), checked
 * again under the organization's lock against the inviter's member as it is then.
 */
export async function createInvite(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  settings: Pick<InviteSettings, 'secretsKey'>,
  principal: Principal,
  input: CreateInviteBody,
  now: Date,
): Promise<Invite> {
  const { organizationId, memberId: createdByMemberId } = principal;
  assertMayGrant(principal, { kind: 'role', role: input.role });
  const id = newId('inv');
  const token = randomToken(32);
  // Suspending, removing or demoting the maker revokes the invites it finds: under the same lock, an invite made
  // meanwhile sees that change (its maker confirmed), or is seen by it.
  return withCallerConfirmed(db, principal, async (trx) => {
    const invite = await insertInvite(trx, {
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
    outcome.details = { invite_id: invite.id, role: invite.role };
    return invite;
  });
}

/**
 * Revokes a live invite; revoking one that was revoked or has expired changes nothing. Invites are in no snapshot:
 * nothing to publish, and a delete's details are null.
 */
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

function inviteStatusOf(invite: Invite, now: Date): InviteStatus {
  if (invite.accepted_at) return 'accepted';
  if (invite.revoked_at) return 'revoked';
  return invite.expires_at > now ? 'pending' : 'expired';
}

export interface InvitePreview {
  invite: Invite;
  organization: { name: string; slug: string };
  status: InviteStatus;
}

const unknownInvite = () => notFound('No invite was issued with this link.');

const STATUS_MESSAGES: Record<Exclude<InviteStatus, 'pending'>, string> = {
  accepted: 'This invite link has already been used.',
  expired: 'This invite link has expired; ask for a new one.',
  revoked: 'This invite link was revoked; ask for a new one.',
};

/** What the console's join page shows before anyone joins: 404 for a token never issued. */
export async function previewInvite(db: Kysely<Database>, token: string, now: Date): Promise<InvitePreview> {
  const found = await findInviteByTokenHash(db, sha256Hex(token));
  if (!found) throw unknownInvite();
  const { organization_name: name, organization_slug: slug, ...invite } = found;
  return { invite, organization: { name, slug }, status: inviteStatusOf(invite, now) };
}

/** 404 for a token never issued, else 409 CONFLICT saying why the invite can no longer be used. */
export async function assertInvitePending(
  db: Kysely<Database> | Transaction<Database>,
  token: string,
  now: Date,
): Promise<void> {
  const found = await findInviteByTokenHash(db, sha256Hex(token));
  if (!found) throw unknownInvite();
  const status = inviteStatusOf(found, now);
  if (status !== 'pending') throw conflict(STATUS_MESSAGES[status], { field: 'token', reason: status });
}

/** The joiner's email: the invite's when it names one (the joiner may repeat it), else the one given (required). */
function joinerEmail(invite: Invite, given: string | undefined): string {
  if (invite.email !== null) {
    if (given !== undefined && given.toLowerCase() !== invite.email) {
      throw validationError(`This invite is for ${invite.email}; leave email out or give that one.`, {
        field: 'email',
        value: given,
      });
    }
    return invite.email;
  }
  if (given === undefined)
    throw validationError('This invite names no email: email is required.', { field: 'email' });
  return given.toLowerCase();
}

/**
 * Uses the invite of `token` once, atomically, and only before it expires, in the joining member's transaction:
 * 404 for a token never issued, 409 (`details.reason`) when it was used, revoked or has expired. Returns the
 * invite and the joiner's email (the invite's, or the one given when it names none).
 */
export async function useInvite(
  trx: Transaction<Database>,
  token: string,
  joinerEmailGiven: string | undefined,
  now: Date,
): Promise<{ invite: Invite; email: string }> {
  const tokenHash = sha256Hex(token);
  // The organization first, as a member update takes it before revoking that member's invites (lock order).
  const issued = await findInviteByTokenHash(trx, tokenHash);
  if (issued) await lockOrganization(trx, issued.organization_id);
  const invite = await acceptInviteRow(trx, tokenHash, now);
  if (!invite) {
    await assertInvitePending(trx, token, now);
    throw conflict('This invite link can no longer be used.', { field: 'token', reason: 'accepted' });
  }
  return { invite, email: joinerEmail(invite, joinerEmailGiven) };
}

/**
 * Revokes the live invites `memberId` made for one of `roles` (a member suspended, removed or demoted); the caller
 * holds the organization's lock. Returns how many were revoked.
 */
export const revokeInvitesMadeBy = (
  trx: Transaction<Database>,
  organizationId: string,
  memberId: string,
  roles: readonly Role[],
  now: Date,
): Promise<number> => revokeInviteRowsMadeBy(trx, organizationId, memberId, roles, now);

/** The organization's live invites (not accepted, revoked or expired at `now`), newest first, one page. */
function listInvites(
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

/**
 * The live invites as `listInvites`, read once the caller is confirmed (shared/write/locks.ts): a live link hands
 * over what making it does, so it is read under the same confirmation as making one.
 */
export function listInvitesAsCaller(
  db: Kysely<Database>,
  caller: Principal,
  now: Date,
  request: PageRequest<{ limit: number; startingAfter?: string | undefined }>,
): Promise<Page<Invite>> {
  return withCallerConfirmed(db, caller, (trx) => listInvites(trx, caller.organizationId, now, request));
}
