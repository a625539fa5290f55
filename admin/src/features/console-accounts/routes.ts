import cookie from '@fastify/cookie';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { AppError, forbidden } from '@ent/common/errors/app-error';
import { crossSiteRefusal, isOwnOrigin, isSafeMethod } from '@ent/common/http/session-request';
import {
  AcceptInviteBody,
  ChangePasswordBody,
  ConsoleSessionSchema,
  InvitePreviewSchema,
  InviteTokenParams,
  OrganizationChoiceSchema,
  SignInBody,
  SignUpBody,
  type InvitePreviewBody,
} from '@ent/contract/console';
import { ErrorBodySchema } from '@ent/contract/common';
import { sessionEnded } from '@ent/common/auth/session-lookup';
import { authenticateSession } from '../console-sessions/authenticate.ts';
import { clearSessionCookie, sessionTokenOf, setSessionCookie } from '../console-sessions/cookie.ts';
import { endSession, toSessionBody, type LiveSession } from '../console-sessions/service.ts';
import { previewInvite } from '../invites/service.ts';
import { signInLimiter } from './sign-in-limiter.ts';
import { signUpLimiter } from './sign-up-limiter.ts';
import {
  acceptInvite,
  changePassword,
  signIn,
  signUp,
  type AccountSettings,
  type SignedIn,
} from './service.ts';

const tags = ['console'];
const HOUR_MS = 60 * 60 * 1000;
const errors = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((status) => [status, ErrorBodySchema]));
/** OpenAPI: these routes take no API key; the session routes take the cookie. */
const noCredentials: readonly Record<string, string[]>[] = [];
const sessionCookie = [{ consoleSession: [] }];

/**
 * docs/console-api.md: the console's own routes. Not audited (SPEC.md part 2: signing up, signing in and joining
 * are not, and none of these is an /org write). Every write here must come from our own origin; the two that
 * act on a session (sign-out, password) also need its CSRF token.
 */
export async function consoleAccountRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  // Only these routes set cookies; the /org routes read the session from the Cookie header themselves.
  await app.register(cookie, { hook: false });
  const settings: AccountSettings = {
    sessionLifetimeMs: app.config.consoleSessionHours * HOUR_MS,
    passwordHashCost: app.config.passwordHashCost,
    limiter: signInLimiter(app.redis, app.redisKeys),
    signUps: signUpLimiter(app.redis, app.redisKeys, app.config.consoleSignUpsPerHour),
  };
  const now = () => new Date(app.clock.now());

  app.addHook('onRequest', async (request, reply) => {
    // Answers carry sessions and CSRF tokens: never kept by a cache.
    reply.header('cache-control', 'no-store');
    if (!isSafeMethod(request.method) && !isOwnOrigin(request)) {
      throw forbidden('The request comes from another origin.');
    }
  });

  const sendSignedIn = (reply: FastifyReply, signedIn: SignedIn, status: 200 | 201) => {
    setSessionCookie(reply, signedIn.token, signedIn.session.expiresAt, now());
    return reply.code(status).send(toSessionBody(signedIn.session, signedIn.token));
  };

  async function currentSession(request: FastifyRequest): Promise<{ session: LiveSession; token: string }> {
    const token = sessionTokenOf(request);
    if (token === undefined) throw sessionEnded();
    return { session: await authenticateSession(app, request, token), token };
  }

  /** A write on the current session: 403 (and nothing runs) without its CSRF token. */
  async function sessionForWrite(request: FastifyRequest): Promise<LiveSession> {
    const { session } = await currentSession(request);
    const refusal = crossSiteRefusal(request, session.csrfHash);
    if (refusal) throw forbidden(refusal);
    return session;
  }

  app.post(
    '/console/api/sign-up',
    {
      schema: {
        tags,
        security: noCredentials,
        body: SignUpBody,
        response: { 201: ConsoleSessionSchema, ...errors(403, 409, 422, 429, 503) },
      },
    },
    async (request, reply) =>
      sendSignedIn(reply, await signUp(app.db, settings, request.body, request.ip, now()), 201),
  );

  app.post(
    '/console/api/sign-in',
    {
      schema: {
        tags,
        security: noCredentials,
        body: SignInBody,
        response: {
          200: Type.Union([ConsoleSessionSchema, OrganizationChoiceSchema]),
          ...errors(401, 403, 422, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const outcome = await signIn(app.db, settings, request.body, request.ip, now());
      if ('choice' in outcome) return reply.code(200).send({ organizations: outcome.choice });
      return sendSignedIn(reply, outcome.signedIn, 200);
    },
  );

  app.post(
    '/console/api/sign-out',
    {
      schema: {
        tags,
        security: sessionCookie,
        response: { 204: { type: 'null' }, ...errors(403, 429, 503) },
      },
    },
    async (request, reply) => {
      // Signing out of a session that already ended just clears the cookie.
      let session: LiveSession | null = null;
      try {
        session = await sessionForWrite(request);
      } catch (error) {
        if (!(error instanceof AppError && error.status === 401)) throw error;
      }
      if (session) await endSession(app.db, session.id, now());
      clearSessionCookie(reply);
      return reply.code(204).send();
    },
  );

  app.get(
    '/console/api/session',
    {
      schema: {
        tags,
        security: sessionCookie,
        response: { 200: ConsoleSessionSchema, ...errors(401, 429, 503) },
      },
    },
    async (request) => {
      const { session, token } = await currentSession(request);
      return toSessionBody(session, token);
    },
  );

  app.post(
    '/console/api/password',
    {
      schema: {
        tags,
        security: sessionCookie,
        body: ChangePasswordBody,
        response: { 204: { type: 'null' }, ...errors(401, 403, 422, 429, 503) },
      },
    },
    async (request, reply) => {
      const session = await sessionForWrite(request);
      await changePassword(app.db, settings, session, request.body, request.ip, now());
      return reply.code(204).send();
    },
  );

  app.get(
    '/console/api/invites/:token',
    {
      schema: {
        tags,
        security: noCredentials,
        params: InviteTokenParams,
        response: { 200: InvitePreviewSchema, ...errors(404, 422, 503) },
      },
    },
    async (request): Promise<InvitePreviewBody> => {
      const { invite, organization, status } = await previewInvite(app.db, request.params.token, now());
      return {
        organization,
        role: invite.role as InvitePreviewBody['role'],
        email: invite.email,
        expires_at: invite.expires_at.toISOString(),
        status,
      };
    },
  );

  app.post(
    '/console/api/invites/:token/accept',
    {
      schema: {
        tags,
        security: noCredentials,
        params: InviteTokenParams,
        body: AcceptInviteBody,
        response: { 201: ConsoleSessionSchema, ...errors(403, 404, 409, 422, 503) },
      },
    },
    async (request, reply) =>
      sendSignedIn(
        reply,
        await acceptInvite(app.db, settings, request.params.token, request.body, now()),
        201,
      ),
  );
}
