import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { SESSION_COOKIE } from '@ent/common/auth/session-token';
import type { AdminTestContext } from '../../../test-support/admin-context.ts';

/** The console's own origin as these tests address it (through a gateway: X-Forwarded-Host and -Proto). */
const CONSOLE_HOST = 'console.test';
export const CONSOLE_ORIGIN = `http://${CONSOLE_HOST}`;
export const PASSWORD = 'correct horse battery';

/** A slug, an email and an address no other case uses, so cases run in any order. */
export function uniqueAccount(label = 'c') {
  const suffix = randomBytes(4).toString('hex');
  return {
    slug: `${label}-${suffix}`,
    email: `${label}-${suffix}@example.com`,
    ip: `10.${randomBytes(1)[0]}.${randomBytes(1)[0]}.${randomBytes(1)[0]}`,
  };
}

/** Browser-like headers: our host, and an Origin only on writes (as fetch sends it). */
export const browserHeaders = (
  method: string,
  extra: Record<string, string> = {},
): Record<string, string> => ({
  host: CONSOLE_HOST,
  ...(method === 'GET' || method === 'HEAD' ? {} : { origin: CONSOLE_ORIGIN }),
  ...extra,
});

/** `ent_session=<token>` from an answer's Set-Cookie, ready for a Cookie header. */
export function sessionCookieOf(res: LightMyRequestResponse): string {
  const header = [res.headers['set-cookie'] ?? []]
    .flat()
    .find((value) => value.startsWith(`${SESSION_COOKIE}=`));
  if (!header) throw new Error(`no session cookie in ${res.statusCode} ${res.body}`);
  return header.split(';')[0]!;
}

export const tokenOfCookie = (cookie: string): string => cookie.slice(SESSION_COOKIE.length + 1);

export interface ConsoleUser {
  cookie: string;
  csrf: string;
  memberId: string;
  slug: string;
  email: string;
  password: string;
  ip: string;
  /** Calls as this person's browser: the cookie always, X-CSRF-Token and Origin on writes. */
  call(
    method: string,
    url: string,
    payload?: object,
    headers?: Record<string, string>,
  ): Promise<LightMyRequestResponse>;
}

export function asBrowser(ctx: AdminTestContext, session: { cookie: string; csrf: string }, ip = '10.0.0.1') {
  return (method: string, url: string, payload?: object, headers: Record<string, string> = {}) =>
    ctx.app.inject({
      method: method as 'GET',
      url,
      headers: browserHeaders(method, {
        cookie: session.cookie,
        'x-forwarded-for': ip,
        ...(method === 'GET' ? {} : { 'x-csrf-token': session.csrf }),
        ...headers,
      }),
      ...(payload === undefined ? {} : { payload }),
    });
}

export const consolePost = (
  ctx: AdminTestContext,
  url: string,
  payload: object,
  headers: Record<string, string> = {},
) => ctx.app.inject({ method: 'POST', url, headers: browserHeaders('POST', headers), payload });

function userFrom(
  ctx: AdminTestContext,
  res: LightMyRequestResponse,
  account: { slug: string; email: string; ip: string },
  password: string,
): ConsoleUser {
  const body = res.json();
  const session = { cookie: sessionCookieOf(res), csrf: body.csrf_token as string };
  return {
    ...session,
    ...account,
    password,
    memberId: body.member.member_id,
    call: asBrowser(ctx, session, account.ip),
  };
}

/** A new organization with its first admin signed in. */
export async function signUp(ctx: AdminTestContext, label = 'org'): Promise<ConsoleUser> {
  const account = uniqueAccount(label);
  const res = await consolePost(
    ctx,
    '/console/api/sign-up',
    {
      email: account.email,
      password: PASSWORD,
      name: 'Ada',
      organization: { name: `Org ${account.slug}`, slug: account.slug },
    },
    { 'x-forwarded-for': account.ip },
  );
  if (res.statusCode !== 201) throw new Error(`sign-up: ${res.statusCode} ${res.body}`);
  return userFrom(ctx, res, account, PASSWORD);
}

export async function signIn(
  ctx: AdminTestContext,
  who: { slug: string; email: string; password: string; ip: string },
) {
  return consolePost(
    ctx,
    '/console/api/sign-in',
    { organization: who.slug, email: who.email, password: who.password },
    { 'x-forwarded-for': who.ip },
  );
}

/** Another browser of the same person: a second session. */
export async function signInAgain(ctx: AdminTestContext, user: ConsoleUser): Promise<ConsoleUser> {
  const res = await signIn(ctx, user);
  if (res.statusCode !== 200) throw new Error(`sign-in: ${res.statusCode} ${res.body}`);
  return userFrom(ctx, res, user, user.password);
}

/** A person who joined `admin`'s organization with an invite of `role`, signed in by accepting it. */
export async function joinWithRole(
  ctx: AdminTestContext,
  admin: ConsoleUser,
  role: 'admin' | 'developer' | 'viewer',
): Promise<ConsoleUser> {
  const invite = await admin.call('POST', '/org/invites', { role });
  if (invite.statusCode !== 201) throw new Error(`invite: ${invite.statusCode} ${invite.body}`);
  const token = decodeURIComponent(invite.json().url.split('/').at(-1));
  const account = { ...uniqueAccount(role), slug: admin.slug };
  const res = await consolePost(
    ctx,
    `/console/api/invites/${token}/accept`,
    { password: PASSWORD, email: account.email },
    { 'x-forwarded-for': account.ip },
  );
  if (res.statusCode !== 201) throw new Error(`accept: ${res.statusCode} ${res.body}`);
  return userFrom(ctx, res, account, PASSWORD);
}

/** Audit entries of an organization with their outcomes, newest first. */
export async function auditEntries(ctx: AdminTestContext, organizationId: string) {
  return ctx.db
    .selectFrom('audit_events as e')
    .leftJoin('audit_outcomes as o', 'o.event_id', 'e.id')
    .select([
      'e.method',
      'e.route',
      'e.actor_member_id',
      'e.actor_auth_type',
      'e.actor_key_prefix',
      'o.outcome',
      'o.status',
    ])
    .where('e.organization_id', '=', organizationId)
    .orderBy('e.id', 'desc')
    .execute();
}
