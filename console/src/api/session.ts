import { request, segment, setCsrfToken } from './client.ts';
import type { AcceptInviteBody, ChangePasswordBody, SignInBody, SignUpBody } from '@ent/contract/console';
import type { InvitePreview, OrganizationChoice, Session } from './types.ts';

/** docs/console-api.md: the console's own routes. Every answer that carries a session arms the CSRF token. */
const base = '/console/api';

const remember = (session: Session): Session => {
  setCsrfToken(session.csrf_token);
  return session;
};

export type SignUpInput = SignUpBody;

/** Without `organization`, the service finds the organizations where the email and password match. */
export type SignInInput = SignInBody;

export const isOrganizationChoice = (answer: Session | OrganizationChoice): answer is OrganizationChoice =>
  'organizations' in answer;

export type AcceptInviteInput = AcceptInviteBody;

export const sessionApi = {
  current: async (): Promise<Session> =>
    remember(await request<Session>('GET', `${base}/session`, { expectUnauthenticated: true })),
  signUp: async (input: SignUpInput): Promise<Session> =>
    remember(await request<Session>('POST', `${base}/sign-up`, { body: input, expectUnauthenticated: true })),
  /** A session, or (the password matched in several organizations) the ones to pick from: sign in again naming one. */
  signIn: async (input: SignInInput): Promise<Session | OrganizationChoice> => {
    const answer = await request<Session | OrganizationChoice>('POST', `${base}/sign-in`, {
      body: input,
      expectUnauthenticated: true,
    });
    return isOrganizationChoice(answer) ? answer : remember(answer);
  },
  signOut: async (): Promise<void> => {
    try {
      await request<null>('POST', `${base}/sign-out`, { expectUnauthenticated: true });
    } finally {
      setCsrfToken(null);
    }
  },
  changePassword: (input: ChangePasswordBody) => request<null>('POST', `${base}/password`, { body: input }),
  invite: (token: string) =>
    request<InvitePreview>('GET', `${base}/invites/${segment(token)}`, { expectUnauthenticated: true }),
  acceptInvite: async (token: string, input: AcceptInviteInput): Promise<Session> =>
    remember(
      await request<Session>('POST', `${base}/invites/${segment(token)}/accept`, {
        body: input,
        expectUnauthenticated: true,
      }),
    ),
};
