import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Organization } from '@ent/common/db/database';
import { ErrorBodySchema, commonErrorResponses } from '@ent/common/schemas/common';
import {
  OrganizationSchema,
  UpdateOrganizationBody,
  type OrganizationBody,
} from '@ent/common/schemas/organization';
import { getOrganization, updateOrganization } from './service.ts';

export const toOrganizationBody = (organization: Organization): OrganizationBody => ({
  organization_id: organization.id,
  name: organization.name,
  slug: organization.slug,
  created_at: organization.created_at.toISOString(),
  updated_at: organization.updated_at.toISOString(),
});

const tags = ['organization'];

export async function organizationRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/org',
    {
      config: { scope: 'org:read' },
      schema: { tags, response: { 200: OrganizationSchema, ...commonErrorResponses } },
    },
    async (request) => toOrganizationBody(await getOrganization(app.db, request.principal!.organizationId)),
  );

  app.patch(
    '/org',
    {
      config: { scope: 'org:write', auditService: 'identity' },
      schema: {
        tags,
        body: UpdateOrganizationBody,
        response: { 200: OrganizationSchema, 409: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const { organization, changes } = await updateOrganization(
        app.db,
        request.principal!.organizationId,
        request.body,
      );
      request.write.details = changes;
      return toOrganizationBody(organization);
    },
  );
}
