import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyringOf } from '@ent/common/crypto/keyring';
import { isEncryptedWithCurrentKey } from '../../src/crypto/secrets.ts';
import { buildAdminApp, type AdminApp } from '../../src/app.ts';
import { signatureHeader } from '../../src/features/webhook/signing.ts';
import { signingSecrets } from '../../src/features/webhook/service.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { verify } from '../webhook/receiver.ts';

const OLD_KEY = randomBytes(32).toString('base64');
const NEW_KEY = randomBytes(32).toString('hex');

let ctx: AdminTestContext;
let org: TestOrganization;
let afterRotation: AdminApp | undefined;

/** The real CLI against this test's database, as an operator runs it. */
function entctl(
  args: string[],
  keys: { SECRETS_KEY: string; SECRETS_KEY_PREVIOUS?: string },
  database: AdminTestContext['database'] = ctx.database,
) {
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'admin/src/cli/entctl.ts', ...args], {
    env: {
      ...process.env,
      DATABASE_URL: database.appUrl,
      DATABASE_OWNER_URL: database.ownerUrl,
      SECRETS_KEY_PREVIOUS: '',
      ...keys,
    },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return result;
}

beforeAll(async () => {
  ctx = await createAdminContext({ config: { secretsKey: keyringOf(OLD_KEY) } });
  org = await createTestOrganization(ctx.db, 'Rotation org');
});

afterAll(async () => {
  await afterRotation?.close();
  await ctx?.close();
});

describe('entctl secrets rotate', () => {
  it('re-encrypts webhook secrets and invite tokens; after the old key is removed, webhooks sign and invite links show', async () => {
    const headers = { ...org.headers, 'content-type': 'application/json' };
    const created = await ctx.app.inject({ method: 'PUT', url: '/org/webhook', headers, payload: { url: 'http://127.0.0.1:9/hook' } });
    expect(created.statusCode).toBe(201);
    const rotated = await ctx.app.inject({ method: 'POST', url: '/org/webhook/rotate', headers: org.headers });
    expect(rotated.statusCode).toBe(200);
    const secrets = [rotated.json().secret as string, created.json().secret as string];
    const invite = await ctx.app.inject({ method: 'POST', url: '/org/invites', headers, payload: { role: 'viewer' } });
    expect(invite.statusCode, invite.body).toBe(201);
    const link = invite.json().url as string;
    expect(link).toContain('/join/');

    const first = entctl(['secrets', 'rotate', '--json'], { SECRETS_KEY: NEW_KEY, SECRETS_KEY_PREVIOUS: OLD_KEY });
    expect(first.status, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toEqual({
      key_id: keyringOf(NEW_KEY).current.id,
      webhook_secrets: { reencrypted: 2, current: 0 },
      invite_tokens: { reencrypted: 1, current: 0 },
    });
    const again = entctl(['secrets', 'rotate', '--json'], { SECRETS_KEY: NEW_KEY, SECRETS_KEY_PREVIOUS: OLD_KEY });
    expect(again.status, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      webhook_secrets: { reencrypted: 0, current: 2 },
      invite_tokens: { reencrypted: 0, current: 1 },
    });
    const human = entctl(['secrets', 'rotate'], { SECRETS_KEY: NEW_KEY });
    expect(human.status, human.stderr).toBe(0);
    expect(human.stdout).toContain('webhook secrets  0 re-encrypted, 2 already current');

    // The old key removed: only the new one in the keyring.
    const newOnly = keyringOf(NEW_KEY);
    const webhook = await ctx.db.selectFrom('webhooks').selectAll().where('organization_id', '=', org.organization_id).executeTakeFirstOrThrow();
    expect(isEncryptedWithCurrentKey(webhook.secret_ciphertext, newOnly)).toBe(true);
    expect(isEncryptedWithCurrentKey(webhook.previous_secret_ciphertext ?? '', newOnly)).toBe(true);
    const signing = signingSecrets(webhook, newOnly, new Date(ctx.clock.now()));
    expect(signing).toEqual(secrets);
    const body = JSON.stringify({ type: 'test' });
    const timestamp = Math.floor(ctx.clock.now() / 1000);
    const signature = signatureHeader(signing, 'msg_rotation', timestamp, body);
    for (const secret of secrets) {
      expect(() =>
        verify(secret, {
          body,
          at: 0,
          headers: { 'webhook-id': 'msg_rotation', 'webhook-timestamp': String(timestamp), 'webhook-signature': signature },
        }),
      ).not.toThrow();
    }

    afterRotation = await buildAdminApp({
      config: { ...ctx.config, secretsKey: newOnly },
      db: ctx.db,
      redis: ctx.redis,
      logger: false,
    });
    const listed = await afterRotation.inject({ method: 'GET', url: '/org/invites', headers: org.headers });
    expect(listed.statusCode, listed.body).toBe(200);
    expect(listed.json().invites.map((i: { url: string }) => i.url)).toEqual([link]);
  });

  it('stops with a clear message when a stored secret decrypts with no key, and for a malformed SECRETS_KEY', async () => {
    // A database of its own: the counts of the rotation case above stay its own.
    const own = await createAdminContext({ config: { secretsKey: keyringOf(OLD_KEY) } });
    try {
      const ownOrg = await createTestOrganization(own.db, 'Unknown key org');
      const created = await own.app.inject({
        method: 'PUT',
        url: '/org/webhook',
        headers: ownOrg.headers,
        payload: { url: 'http://127.0.0.1:9/hook' },
      });
      expect(created.statusCode).toBe(201);
      const unknown = entctl(['secrets', 'rotate'], { SECRETS_KEY: randomBytes(32).toString('base64') }, own.database);
      expect(unknown.status).toBe(1);
      expect(unknown.stderr).toMatch(/^entctl: webhook of org_\S+: secret was encrypted with key id [0-9a-f]{8}, which is in neither/m);
      const malformed = entctl(['secrets', 'rotate'], { SECRETS_KEY: 'too-short' }, own.database);
      expect(malformed.status).toBe(1);
      expect(malformed.stderr.trim()).toBe(
        'entctl: SECRETS_KEY must be 32 bytes, as 64 hex characters or base64 (generate one with: openssl rand -base64 32)',
      );
    } finally {
      await own.close();
    }
  });
});
