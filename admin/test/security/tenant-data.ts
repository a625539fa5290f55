import { newId } from '@ent/common/ids';
import type { AdminTestContext } from '../../../test-support/admin-context.ts';
import type { AdminApp } from '../../src/app.ts';

/** The ids of one organization's data, by the path parameter name each is used under. */
export interface TenantData {
  subscriber_id: string[];
  key: string[];
  feature_key: string[];
  subscription_id: string[];
  member_id: string[];
  service_account_id: string[];
  key_id: string[];
  invite_id: string[];
}

/**
 * Gives an organization one of everything the API manages (features, a plan, subscribers, a subscription, an
 * override, a service account with a key, an invited member, an invite, a webhook), through the routes.
 * `prefix` keeps catalog keys and subscriber ids apart between organizations.
 */
export async function seedTenant(
  app: AdminApp,
  headers: Record<string, string>,
  prefix: string,
): Promise<TenantData> {
  const send = async (method: 'POST' | 'PUT', url: string, payload: object, status: number) => {
    const res = await app.inject({ method, url, headers, payload });
    if (res.statusCode !== status) throw new Error(`${method} ${url} -> ${res.statusCode}: ${res.body}`);
    return res.json() as Record<string, string>;
  };
  const flag = `${prefix}_sso`;
  const limit = `${prefix}_seats`;
  const plan = `${prefix}_basic`;
  const [alice, bob] = [`${prefix}-alice`, `${prefix}-bob`];
  await send('POST', '/org/features', { key: flag, name: 'SSO', kind: 'flag' }, 201);
  await send('POST', '/org/features', { key: limit, name: 'Seats', kind: 'limit' }, 201);
  await send(
    'POST',
    '/org/plans',
    { key: plan, name: 'Basic', kind: 'catalog', grants: [{ feature: limit, kind: 'limit', limit: 3 }] },
    201,
  );
  await send('POST', '/org/subscribers', { subscriber_id: alice, name: 'Alice' }, 201);
  await send('POST', '/org/subscribers', { subscriber_id: bob, name: 'Bob' }, 201);
  const subscription = await send('POST', `/org/subscribers/${alice}/subscriptions`, { plan_id: plan }, 201);
  await send('PUT', `/org/subscribers/${bob}/overrides/${flag}`, { kind: 'flag', allowed: true }, 200);
  const account = await send(
    'POST',
    '/org/service-accounts',
    { name: `${prefix} ci`, role: 'developer' },
    201,
  );
  const key = await send(
    'POST',
    `/org/service-accounts/${account.service_account_id}/api-keys`,
    { name: 'ci', scopes: ['check'] },
    201,
  );
  const member = await send('POST', '/org/members', { email: `${prefix}@example.test`, role: 'viewer' }, 201);
  const invite = await send('POST', '/org/invites', { role: 'viewer' }, 201);
  await send('PUT', '/org/webhook', { url: 'http://127.0.0.1:9/hook' }, 201);
  return {
    subscriber_id: [alice, bob],
    key: [flag, limit, plan],
    feature_key: [flag, limit],
    subscription_id: [subscription.subscription_id!],
    member_id: [member.member_id!, account.member_id!],
    service_account_id: [account.service_account_id!],
    key_id: [key.key_id!],
    invite_id: [invite.invite_id!],
  };
}

/**
 * Features sso (flag) and seats (limit) through the API (`setup` makes a call that must succeed), and plans basic
 * and pro, without grants, straight into the table.
 */
export async function seedCatalog(
  db: AdminTestContext['db'],
  organizationId: string,
  setup: (method: 'POST', url: string, payload: object) => Promise<unknown>,
): Promise<void> {
  await setup('POST', '/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });
  await setup('POST', '/org/features', { key: 'seats', name: 'Seats', kind: 'limit' });
  for (const key of ['basic', 'pro']) {
    await db
      .insertInto('plans')
      .values({ id: newId('plan'), organization_id: organizationId, key, name: key, kind: 'catalog' })
      .execute();
  }
}
