import { api } from './client.ts';

export interface Organization {
  organization_id: string;
  name: string;
  slug: string;
  created_at: string;
  updated_at: string;
}

export const organizationApi = {
  get: () => api.get<Organization>('/org'),
  update: (input: { name?: string; slug?: string }) => api.patch<Organization>('/org', input),
};
