import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { conflict, unauthenticated, validationError } from '@ent/common/errors/app-error';
import { newId } from '@ent/common/ids';
import type {
  AcceptInviteBody,
  ChangePasswordBody,
  InvitePreviewBody,
  OrganizationChoiceBody,
  SignInBody,
  SignUpBody,
} from '@ent/contract/console';
import {
  endMemberSessions,
  liveSession,
  startSession,
  type LiveSession,
  type StartedSession,
} from '../console-sessions/service.ts';
import { assertInvitePending, previewInvite } from '../invites/service.ts';
import { WriteOutcome } from '../shared/write/outcome.ts';
import { insertFirstAdmin, redeemInvite } from '../members/service.ts';
import { insertOrganization } from '../provisioning/create-organization.ts';
import { hashPassword, verifyNothing, verifyPassword } from './passwords.ts';
import { signInRateLimited, type SignInAttempt, type SignInLimiter } from './sign-in-limiter.ts';
import type { SignUpLimiter } from './sign-up-limiter.ts';
import { findPasswordHash, findSignInCandidates, setPasswordHash } from './store.ts';
import { transact } from '@ent/common/outbox/record';

export interface AccountSettings {
  /** CONSOLE_SESSION_HOURS, absolute from sign-in. */
  sessionLifetimeMs: number;
  /** PASSWORD_HASH_COST: log2 of scrypt's N for new hashes (and the decoy checks). */
  passwordHashCost: number;
  limiter: SignInLimiter;
  signUps: SignUpLimiter;
}

/** A session that was just started: its token goes into the cookie, the rest into the answer. */
export interface SignedIn {
  session: LiveSession;
  token: string;
}

const isUniqueViolation = (error: unknown): boolean => (error as { code?: string }).code === '23505';

const slugTaken = (slug: string) =>
  conflict(`The slug "${slug}" is already taken.`, { field: 'organization.slug', value: slug });

/** One answer for every wrong part, so a sign-in tells nobody which organizations or people exist. */
const wrongCredentials = () => unauthenticated('The organization, email or password is wrong.');

/** A sign-in's outcome: a session, or (no organization named, several matched) the organizations to pick from. */
export type SignInOutcome = { signedIn: SignedIn } | { choice: OrganizationChoiceBody['organizations'] };

async function signedIn(db: Kysely<Database>, started: StartedSession, now: Date): Promise<SignedIn> {
  const session = await liveSession(db, started.token, now);
  if (!session) throw new Error(`session ${started.id} does not live right after it started`);
  return { session, token: started.token };
}

/**
 * A new self-serve organization with the person as its first member (admin), their password and a session, in
 * one transaction. No service account or key is made: the person makes those in the console when an integration
 * needs one (a key no one was shown would be a credential nobody holds).
 */
export async function signUp(
  db: Kysely<Database>,
  settings: AccountSettings,
  input: SignUpBody,
  ip: string,
  now: Date,
): Promise<SignedIn> {
  const { slug } = input.organization;
  // Counted before anything that answers whether the slug is taken: otherwise 409s would enumerate slugs freely.
  await settings.signUps.admit(ip, now.getTime());
  // Checked before the hash so a taken slug costs no scrypt; the unique index still decides a race.
  const taken = await db.selectFrom('organizations').select('id').where('slug', '=', slug).executeTakeFirst();
  if (taken) throw slugTaken(slug);
  const passwordHash = await hashPassword(input.password, settings.passwordHashCost);
  const started = await db.transaction().execute(async (trx) => {
    const organizationId = newId('org');
    try {
      await insertOrganization(trx, { id: organizationId, name: input.organization.name, slug });
    } catch (error) {
      throw isUniqueViolation(error) ? slugTaken(slug) : error;
    }
    const member = await insertFirstAdmin(trx, organizationId, {
      email: input.email,
      name: input.name ?? null,
    });
    const who = { organizationId, memberId: member.id };
    await setPasswordHash(trx, who, passwordHash, now);
    return startSession(trx, who, now, settings.sessionLifetimeMs);
  });
  return signedIn(db, started, now);
}

/**
 * A password check under the sign-in limits: 429 before it runs when the account or address has used its failures;
 * otherwise it holds a place in both (a failure, unless the caller then says `succeeded`), and gives them back
 * if the check itself fails to reach a verdict.
 */
async function limitedCheck<T>(
  limiter: SignInLimiter,
  attempt: SignInAttempt,
  now: Date,
  check: () => Promise<T>,
): Promise<T> {
  const wait = await limiter.reserve(attempt, now.getTime());
  if (wait > 0) throw signInRateLimited(wait);
  try {
    return await check();
  } catch (error) {
    await limiter.abandoned(attempt).catch(() => {});
    throw error;
  }
}

type SignInCandidate = Awaited<ReturnType<typeof findSignInCandidates>>[number];

/**
 * The memberships whose password is `password` and which may sign in (active). Every membership found costs one
 * scrypt, none found costs one too: the time says nothing about whether the password is right, or whether the email
 * exists; it grows only with how many organizations the email belongs to (checked in parallel on libuv's pool).
 */
async function matchingMemberships(
  candidates: SignInCandidate[],
  password: string,
  cost: number,
): Promise<SignInCandidate[]> {
  if (candidates.length === 0) return verifyNothing(password, cost).then(() => []);
  const verdicts = await Promise.all(
    candidates.map((candidate) =>
      candidate.password_hash
        ? verifyPassword(password, candidate.password_hash)
        : verifyNothing(password, cost),
    ),
  );
  return candidates.filter((candidate, i) => verdicts[i] && candidate.status === 'active');
}

/**
 * Limited first (429 before any password is checked), then the person is looked up by email, in the organization
 * named by slug or, when none is, in every organization. One match signs in there; several answer the choice
 * (the console signs in again naming one); none is the one 401, whichever part was wrong.
 */
export async function signIn(
  db: Kysely<Database>,
  settings: AccountSettings,
  input: SignInBody,
  ip: string,
  now: Date,
): Promise<SignInOutcome> {
  const attempt = { email: input.email, ip };
  const slug = input.organization?.trim().toLowerCase();
  const matching = await limitedCheck(settings.limiter, attempt, now, async () =>
    matchingMemberships(
      await findSignInCandidates(db, input.email.trim(), slug),
      input.password,
      settings.passwordHashCost,
    ),
  );
  const [only, ...others] = matching;
  if (!only) throw wrongCredentials();
  await settings.limiter.succeeded(attempt);
  if (others.length > 0) {
    return {
      choice: matching.map((m) => ({ name: m.organization_name, slug: m.organization_slug })),
    };
  }
  const who = { organizationId: only.organization_id, memberId: only.member_id };
  return { signedIn: await signedIn(db, await startSession(db, who, now, settings.sessionLifetimeMs), now) };
}

/**
 * The current password must be given (a wrong one counts as a failed sign-in of the member's account, so a
 * borrowed session cannot guess it freely); the new one ends every other session of the member.
 */
export async function changePassword(
  db: Kysely<Database>,
  settings: AccountSettings,
  session: LiveSession,
  input: ChangePasswordBody,
  ip: string,
  now: Date,
): Promise<void> {
  const attempt = { email: session.member.email, ip };
  const matches = await limitedCheck(settings.limiter, attempt, now, async () => {
    const stored = await findPasswordHash(db, session.memberId);
    return stored
      ? verifyPassword(input.current_password, stored)
      : verifyNothing(input.current_password, settings.passwordHashCost);
  });
  if (!matches) throw validationError('The current password is wrong.', { field: 'current_password' });
  await settings.limiter.succeeded(attempt);
  const passwordHash = await hashPassword(input.new_password, settings.passwordHashCost);
  const who = { organizationId: session.organizationId, memberId: session.memberId };
  await db.transaction().execute(async (trx) => {
    await setPasswordHash(trx, who, passwordHash, now);
    await endMemberSessions(trx, who, now, session.id);
  });
}

/**
 * Joins the invite's organization with its role: the member, their password and a session commit together with
 * the invite's single use, or none of them does. An invite that cannot be used is refused before any scrypt.
 */
export async function acceptInvite(
  db: Kysely<Database>,
  settings: AccountSettings,
  token: string,
  input: AcceptInviteBody,
  now: Date,
): Promise<SignedIn> {
  await assertInvitePending(db, token, now);
  const passwordHash = await hashPassword(input.password, settings.passwordHashCost);
  const started = await transact(db, async (trx) => {
    // Not an /org write (no write pipeline): the outbox entry of the auth version it bumps is published by the relay.
    const member = await redeemInvite(
      trx,
      new WriteOutcome(),
      token,
      { email: input.email, name: input.name },
      now,
    );
    const who = { organizationId: member.organization_id, memberId: member.id };
    await setPasswordHash(trx, who, passwordHash, now);
    return startSession(trx, who, now, settings.sessionLifetimeMs);
  });
  return signedIn(db, started, now);
}

/** What an invite link's page shows before the person joins (GET /console/api/invites/{token}). */
export async function invitePreview(
  db: Kysely<Database>,
  token: string,
  now: Date,
): Promise<InvitePreviewBody> {
  const { invite, organization, status } = await previewInvite(db, token, now);
  return {
    organization,
    role: invite.role as InvitePreviewBody['role'],
    email: invite.email,
    expires_at: invite.expires_at.toISOString(),
    status,
  };
}
