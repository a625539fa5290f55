import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Member } from '@ent/common/db/database';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import {
  CreateMemberBody,
  ListMembersQuery,
  ListMintedKeysQuery,
  MemberIdParams,
  MemberListSchema,
  MemberSchema,
  UpdateMemberBody,
  type MemberBody,
} from '@ent/contract/members';
import { ApiKeyListSchema } from '@ent/contract/api-keys';
import { createMember, getMember, listMembers, listMintedKeys, updateMember } from './service.ts';

const toMemberBody = (member: Member): MemberBody => ({
  member_id: member.id,
  kind: member.kind,
  email: member.email,
  name: member.name,
  role: member.role as MemberBody['role'],
  status: member.status,
  created_at: member.created_at.toISOString(),
  updated_at: member.updated_at.toISOString(),
});

const tags = ['members'];

export async function memberRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/org/members',
    {
      config: { scope: 'org:read' },
      schema: {
        tags,
        querystring: ListMembersQuery,
        response: { 200: MemberListSchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const page = await listMembers(app.db, request.principal!.organizationId, {
        limit: request.query.limit,
        startingAfter: request.query.starting_after,
        status: request.query.status,
        kind: request.query.kind,
      });
      return { members: page.items.map(toMemberBody), has_more: page.hasMore };
    },
  );

  app.get(
    '/org/members/:member_id',
    {
      config: { scope: 'org:read' },
      schema: {
        tags,
        params: MemberIdParams,
        response: { 200: MemberSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) =>
      toMemberBody(await getMember(app.db, request.principal!.organizationId, request.params.member_id)),
  );

  // What removing or demoting the member would revoke: the console shows it before the admin confirms.
  app.get(
    '/org/members/:member_id/minted-keys',
    {
      config: { scope: 'org:read' },
      schema: {
        tags,
        description:
          'The live API keys this member minted (on any service account), newest first: what a removal or a demotion revokes unless `revoke_minted_keys` is false.',
        params: MemberIdParams,
        querystring: ListMintedKeysQuery,
        response: { 200: ApiKeyListSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const organizationId = request.principal!.organizationId;
      const page = await listMintedKeys(app.db, organizationId, request.params.member_id, {
        limit: request.query.limit,
        startingAfter: request.query.starting_after,
      });
      return { api_keys: page.items, has_more: page.hasMore };
    },
  );

  app.post(
    '/org/members',
    {
      config: { scope: 'org:write', auditService: 'identity', adminOnly: true },
      schema: {
        tags,
        body: CreateMemberBody,
        response: { 201: MemberSchema, 409: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) => createMember(trx, outcome, request.principal!, request.body),
        (member) => ({ status: 201, body: toMemberBody(member) }),
      );
    },
  );

  app.patch(
    '/org/members/:member_id',
    {
      config: { scope: 'org:write', auditService: 'identity', adminOnly: true },
      schema: {
        tags,
        params: MemberIdParams,
        body: UpdateMemberBody,
        response: { 200: MemberSchema, 404: ErrorBodySchema, 409: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          updateMember(
            trx,
            outcome,
            request.principal!,
            request.params.member_id,
            request.body,
            new Date(app.clock.now()),
          ),
        (member) => ({ status: 200, body: toMemberBody(member) }),
      );
    },
  );
}
