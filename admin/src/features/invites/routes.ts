import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Config } from '@ent/common/config';
import type { Invite } from '@ent/common/db/database';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import {
  CreateInviteBody,
  InviteIdParams,
  InviteListSchema,
  InviteSchema,
  ListInvitesQuery,
  type InviteBody,
} from '@ent/contract/invites';
import { canGrant, type Principal, type Role } from '@ent/common/auth/scopes';
import {
  createInvite,
  inviteLinkOf,
  listInvitesAsCaller,
  localConsoleUrl,
  revokeInvite,
  type InviteSettings,
} from './service.ts';

/**
 * Where this request's invite links point: CONSOLE_URL, or without it `/console` on the host the request reached
 * (`request.host` and `request.protocol` take X-Forwarded-Host and -Proto from TRUSTED_PROXIES only: the gateway
 * states what its client addressed). Only ever shown to the caller: the token is the secret, not the host, and no
 * link is sent anywhere else (docs/decisions.md, SECURITY.md).
 */
function consoleUrlFor(config: Config, request: FastifyRequest): string {
  if (config.consoleUrl) return config.consoleUrl;
  try {
    const origin = new URL(`${request.protocol}://${request.host}`).origin;
    if (origin !== 'null') return `${origin}/console`;
  } catch {
    // A Host no URL can hold: the gateway's default address below.
  }
  return localConsoleUrl(config.gatewayPort);
}

const inviteSettings = (config: Config, request: FastifyRequest): InviteSettings => ({
  secretsKey: config.secretsKey,
  consoleUrl: consoleUrlFor(config, request),
});

const toInviteBody = (invite: Invite, settings: InviteSettings, showLink: boolean): InviteBody => ({
  invite_id: invite.id,
  role: invite.role as InviteBody['role'],
  email: invite.email,
  url: showLink ? inviteLinkOf(invite, settings) : null,
  expires_at: invite.expires_at.toISOString(),
  created_at: invite.created_at.toISOString(),
});

const tags = ['invites'];

/**
 * A link joins with its role, so reading one hands over what making one does: only a caller who could have
 * made that invite (`org:write`, and every right of the role) sees its link in the list.
 */
const mayHaveMade = (principal: Principal, role: Role): boolean =>
  principal.scopes.has('org:write') && canGrant(principal, { kind: 'role', role });

/** Invite links let anyone join with the invite's role, so only admins create, read or revoke them. */
export async function inviteRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const now = () => new Date(app.clock.now());

  app.post(
    '/org/invites',
    {
      config: { scope: 'org:write', auditService: 'identity', adminOnly: true },
      schema: { tags, body: CreateInviteBody, response: { 201: InviteSchema, ...commonErrorResponses } },
    },
    async (request, reply) => {
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) => createInvite(trx, outcome, app.config, request.principal!, request.body, now()),
        (invite) => ({ status: 201, body: toInviteBody(invite, inviteSettings(app.config, request), true) }),
      );
    },
  );

  app.get(
    '/org/invites',
    {
      config: { scope: 'org:read', auditService: 'identity', auditRead: true, adminOnly: true },
      schema: {
        tags,
        querystring: ListInvitesQuery,
        response: { 200: InviteListSchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const principal = request.principal!;
      const page = await listInvitesAsCaller(app.db, principal, now(), {
        limit: request.query.limit,
        startingAfter: request.query.starting_after,
      });
      const settings = inviteSettings(app.config, request);
      const invites = page.items.map((invite) =>
        toInviteBody(invite, settings, mayHaveMade(principal, invite.role as Role)),
      );
      return { invites, has_more: page.hasMore };
    },
  );

  app.delete(
    '/org/invites/:invite_id',
    {
      config: { scope: 'org:write', auditService: 'identity', adminOnly: true },
      schema: {
        tags,
        params: InviteIdParams,
        response: {
          204: { type: 'null' },
          404: ErrorBodySchema,
          409: ErrorBodySchema,
          ...commonErrorResponses,
        },
      },
    },
    async (request, reply) => {
      return app.writePipeline.answer(
        request,
        reply,
        (trx) => revokeInvite(trx, request.principal!.organizationId, request.params.invite_id, now()),
        () => ({ status: 204 }),
      );
    },
  );
}
