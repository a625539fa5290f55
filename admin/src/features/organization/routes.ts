import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { TokenBuckets } from '@ent/common/auth/failure-limiter';
import type { Organization } from '@ent/common/db/database';
import { AppError } from '@ent/common/errors/app-error';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import {
  OrganizationSchema,
  UpdateOrganizationBody,
  type OrganizationBody,
} from '@ent/contract/organization';
import { getOrganization, updateOrganization } from './service.ts';

const toOrganizationBody = (organization: Organization): OrganizationBody => ({
  organization_id: organization.id,
  name: organization.name,
  slug: organization.slug,
  created_at: organization.created_at.toISOString(),
  updated_at: organization.updated_at.toISOString(),
});

const tags = ['organization'];

/**
 * Slugs are one namespace across tenants, so a 409 necessarily says a slug is taken: slugs are public names,
 * never secrets (generated ones end in six characters of the organization id, so they cannot be guessed from
 * a name). What is limited is probing: an organization gets this many "slug taken" answers an hour (per
 * admin process); after that PATCH /org is 429 before its body is read (so it is not audited, like every 429).
 */
export const SLUG_CONFLICTS_PER_HOUR = 5;

const slugProbing = (retryAfterSeconds: number) =>
  new AppError(
    429,
    'RATE_LIMITED',
    'Too many slug changes refused as taken; retry later.',
    {},
    {
      'retry-after': String(retryAfterSeconds),
    },
  );

const isSlugConflict = (error: unknown): boolean =>
  error instanceof AppError && error.status === 409 && error.details?.field === 'slug';

export async function organizationRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const slugConflicts = new TokenBuckets(SLUG_CONFLICTS_PER_HOUR, 3_600_000, () => app.clock.now(), 100_000);

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
      // After authentication (a global onRequest hook), before the audit entry (preParsing).
      onRequest: async (request) => {
        if (!request.principal) return;
        const retryAfter = slugConflicts.retryAfterSeconds(request.principal.organizationId);
        if (retryAfter > 0) throw slugProbing(retryAfter);
      },
      schema: {
        tags,
        body: UpdateOrganizationBody,
        response: { 200: OrganizationSchema, 409: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      const organizationId = request.principal!.organizationId;
      return app.writePipeline
        .answer(
          request,
          reply,
          (trx, outcome) => updateOrganization(trx, outcome, organizationId, request.body),
          (organization) => ({ status: 200, body: toOrganizationBody(organization) }),
        )
        .catch((error: unknown) => {
          if (isSlugConflict(error)) slugConflicts.take(organizationId);
          throw error;
        });
    },
  );
}
