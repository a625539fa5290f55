import type { UpdateOrganizationBody } from '@ent/contract/organization';
import { api } from './client.ts';
import type { Organization } from './types.ts';

export type { Organization } from './types.ts';

export const organizationApi = {
  get: () => api.get<Organization>('/org'),
  update: (input: UpdateOrganizationBody) => api.patch<Organization>('/org', input),
};
