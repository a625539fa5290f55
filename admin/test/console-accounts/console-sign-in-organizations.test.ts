import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STRONG_PASSWORD_HASH_COST } from '@ent/common/config';
import { hashPassword } from '../../src/features/console-accounts/passwords.ts';
import { createAdminContext, type AdminTestContext } from '../../../test-support/admin-context.ts';
import {
  PASSWORD,
  asBrowser,
  consolePost,
  sessionCookieOf,
  signIn,
  uniqueAccount,
} from '../console-sessions/browser.ts';

let ctx: AdminTestContext;

beforeAll(async () => {
  ctx = await createAdminContext();
});
afterAll(() => ctx.close());

/** A new organization whose first admin is `email` (the same person may sign up several). */
async function organizationOf(email: string, password = PASSWORD, label = 'multi') {
  const { slug, ip } = uniqueAccount(label);
  const res = await consolePost(
    ctx,
    '/console/api/sign-up',
    { email, password, organization: { name: `Org ${slug}`, slug } },
    { 'x-forwarded-for': ip },
  );
  if (res.statusCode !== 201) throw new Error(`sign-up: ${res.statusCode} ${res.body}`);
  const body = res.json();
  return { slug, name: `Org ${slug}`, memberId: body.member.member_id as string, session: body };
}

/** A sign-in as the console's form sends it: email and password, no organization. */
const signInByEmail = (email: string, password: string, ip = uniqueAccount().ip) =>
  consolePost(ctx, '/console/api/sign-in', { email, password }, { 'x-forwarded-for': ip });

describe('sign-in without an organization', () => {
  it('signs a member of one organization straight into it, with its session and cookie', async () => {
    const { email } = uniqueAccount('single');
    const organization = await organizationOf(email);
    const res = await signInByEmail(email.toUpperCase(), PASSWORD);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      member: { member_id: organization.memberId, email },
      organization: { name: organization.name, slug: organization.slug },
      csrf_token: expect.any(String),
    });
    const cookie = sessionCookieOf(res);
    const org = await asBrowser(ctx, { cookie, csrf: res.json().csrf_token })('GET', '/org');
    expect(org.json().slug).toBe(organization.slug);
  });

  it('answers the organizations to pick from (no session) when the password matches in several; naming one signs in there', async () => {
    const { email } = uniqueAccount('several');
    const first = await organizationOf(email);
    const second = await organizationOf(email);
    const res = await signInByEmail(email, PASSWORD);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      organizations: [
        { name: first.name, slug: first.slug },
        { name: second.name, slug: second.slug },
      ],
    });
    expect(res.headers['set-cookie']).toBeUndefined();

    const picked = await signIn(ctx, {
      slug: second.slug,
      email,
      password: PASSWORD,
      ip: uniqueAccount().ip,
    });
    expect(picked.statusCode, picked.body).toBe(200);
    expect(picked.json()).toMatchObject({
      member: { member_id: second.memberId },
      organization: { slug: second.slug },
    });
    sessionCookieOf(picked);
  });

  it('offers only the organizations where the password is right, and signs straight in when that is one', async () => {
    const { email } = uniqueAccount('differ');
    const first = await organizationOf(email, 'first organization password');
    const second = await organizationOf(email, 'second organization password');
    const res = await signInByEmail(email, 'second organization password');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      member: { member_id: second.memberId },
      organization: { slug: second.slug },
    });
    const other = await signInByEmail(email, 'first organization password');
    expect(other.json()).toMatchObject({ organization: { slug: first.slug } });
  });

  it('leaves out an organization where the member is suspended', async () => {
    const { email } = uniqueAccount('suspended');
    const kept = await organizationOf(email);
    const suspended = await organizationOf(email);
    // Set directly: the rule that an organization keeps an active admin is not what this case is about.
    await ctx.db
      .updateTable('members')
      .set({ status: 'suspended' })
      .where('id', '=', suspended.memberId)
      .execute();
    const res = await signInByEmail(email, PASSWORD);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ organization: { slug: kept.slug } });
  });

  it('checks the 20 oldest memberships of an email; a newer one is reached by naming its organization', async () => {
    const { email } = uniqueAccount('many');
    const organizations = [];
    for (let i = 0; i < 21; i++) organizations.push(await organizationOf(email));
    const res = await signInByEmail(email, PASSWORD);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().organizations.map((o: { slug: string }) => o.slug)).toEqual(
      organizations.slice(0, 20).map((o) => o.slug),
    );
    const newest = organizations[20]!;
    const named = await signIn(ctx, { slug: newest.slug, email, password: PASSWORD, ip: uniqueAccount().ip });
    expect(named.json()).toMatchObject({ member: { member_id: newest.memberId } });
  });

  it('answers one 401, with the same body, for an unknown email and for a wrong password', async () => {
    const { email } = uniqueAccount('wrong');
    await organizationOf(email);
    await organizationOf(email);
    const unknown = await signInByEmail(`nobody-${email}`, PASSWORD);
    const wrong = await signInByEmail(email, 'not the password at all');
    for (const res of [unknown, wrong]) {
      expect(res.statusCode).toBe(401);
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    const { request_id: _u, ...unknownError } = unknown.json().error;
    const { request_id: _w, ...wrongError } = wrong.json().error;
    expect(wrongError).toEqual(unknownError);
    expect(unknownError.code).toBe('UNAUTHENTICATED');
  });

  it('counts failures against the email whether or not an organization is named', async () => {
    const { email, ip } = uniqueAccount('shared');
    const organization = await organizationOf(email);
    for (let i = 0; i < 3; i++) expect((await signInByEmail(email, `wrong ${i}`, ip)).statusCode).toBe(401);
    for (let i = 0; i < 2; i++) {
      const res = await signIn(ctx, { slug: organization.slug, email, password: `wrong ${i}`, ip });
      expect(res.statusCode).toBe(401);
    }
    expect((await signInByEmail(email, PASSWORD, ip)).statusCode).toBe(429);
  });
});

describe('password hashes made at another cost', () => {
  it('signs in with a password hashed at the production cost (N=2^15) while new ones use the configured cost', async () => {
    const { email } = uniqueAccount('strong');
    const organization = await organizationOf(email);
    const strong = await hashPassword('a password from production', STRONG_PASSWORD_HASH_COST);
    expect(strong).toMatch(/^scrypt\$32768\$8\$1\$/);
    await ctx.db
      .updateTable('member_passwords')
      .set({ password_hash: strong })
      .where('member_id', '=', organization.memberId)
      .execute();
    const res = await signInByEmail(email, 'a password from production');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ member: { member_id: organization.memberId } });
  });
});
