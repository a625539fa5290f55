import { api, segment, type Query } from './client.ts';
import type { CreateApiKeyBody } from '@ent/contract/api-keys';
import type { CreateInviteBody } from '@ent/contract/invites';
import type { CreateServiceAccountBody } from '@ent/contract/service-accounts';
import type { UpdateMemberBody } from '@ent/contract/members';
import type { ApiKey, CreatedApiKey, Invite, Member, Page, ServiceAccount } from './types.ts';

const accountPath = (id: string) => `/org/service-accounts/${segment(id)}`;

export const accessApi = {
  members: (query: Query) => api.get<Page & { members: Member[] }>('/org/members', { limit: 100, ...query }),
  /** `revoke_minted_keys` only with a removal or a role change (omitted: the keys the member minted are revoked). */
  updateMember: (memberId: string, input: UpdateMemberBody) =>
    api.patch<Member>(`/org/members/${segment(memberId)}`, input),
  /** The live keys a member minted: what removing or demoting them revokes. */
  mintedKeys: (memberId: string) =>
    api.get<Page & { api_keys: ApiKey[] }>(`/org/members/${segment(memberId)}/minted-keys`, { limit: 100 }),

  invites: () => api.get<Page & { invites: Invite[] }>('/org/invites', { limit: 100 }),
  createInvite: (input: CreateInviteBody) => api.post<Invite>('/org/invites', input),
  revokeInvite: (inviteId: string) => api.delete(`/org/invites/${segment(inviteId)}`),

  serviceAccounts: () =>
    api.get<Page & { service_accounts: ServiceAccount[] }>('/org/service-accounts', { limit: 100 }),
  createServiceAccount: (input: CreateServiceAccountBody) =>
    api.post<ServiceAccount>('/org/service-accounts', input),

  apiKeys: (serviceAccountId: string) =>
    api.get<Page & { api_keys: ApiKey[] }>(`${accountPath(serviceAccountId)}/api-keys`, { limit: 100 }),
  /** `scopes: []` is full access; the answer is the only time the plaintext is shown. */
  createApiKey: (serviceAccountId: string, input: CreateApiKeyBody) =>
    api.post<CreatedApiKey>(`${accountPath(serviceAccountId)}/api-keys`, input),
  revokeApiKey: (serviceAccountId: string, keyId: string) =>
    api.delete(`${accountPath(serviceAccountId)}/api-keys/${segment(keyId)}`),
};
