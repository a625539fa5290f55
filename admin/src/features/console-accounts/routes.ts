import cookie from '@fastify/cookie';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { forbidden } from '@ent/common/errors/app-error';
import { isOwnOrigin, isSafeMethod } from '@ent/common/http/session-request';
import {
  AcceptInviteBody,
  ChangePasswordBody,
  ConsoleSessionSchema,
  InvitePreviewSchema,
  InviteTokenParams,
  OrganizationChoiceSchema,
  SignInBody,
  SignUpBody,
} from '@ent/contract/console';
import { ErrorBodySchema } from '@ent/contract/common';
import { signInLimiter } from './sign-in-limiter.ts';
import { signUpLimiter } from './sign-up-limiter.ts';
import {
  acceptInvite,
  changePassword,
  invitePreview,
  signIn,
  signUp,
  type AccountSettings,
  type SignedIn,
} from './service.ts';
import { currentSessionBody, sessionForWrite, signedInBody, signOut } from './session.ts';

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

  const sendSignedIn = (reply: FastifyReply, signedIn: SignedIn, status: 200 | 201) =>
    reply.code(status).send(signedInBody(reply, signedIn, now()));

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
      await signOut(app, request, reply, now());
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
    async (request) => currentSessionBody(app, request),
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
      const session = await sessionForWrite(app, request);
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
    async (request) => invitePreview(app.db, request.params.token, now()),
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
