import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, ConsoleMessage, Page, Request } from 'playwright-core';
import { assertChromiumInstalled, launchChromium } from '../../test-support/chromium.ts';
import { FailureRecorder } from './failure-record.ts';
import { screenshot } from './screenshots.ts';
import { startReceiver, type Receiver } from './receiver.ts';
import { builtScripts, devOnlyMarkers, ensureConsoleBuilt, startStack, type Stack } from './stack.ts';
import { seedPastPeriod } from './metered-seed.ts';
import { seedUsageHistory } from './usage-seed.ts';

/**
 * The console in Debian's Chromium against real admin, worker and gateway processes: an admin signs up and
 * manages the catalog, subscribers, access and the audit log through the pages; invited members see only what
 * their role allows. The cases run in order: each builds on what the one before it made in the pages (the admin's
 * session, the catalog), while what a case needs from the API side (a backend's key, a metered subscriber) it
 * makes itself. A failed case leaves what its pages saw in console/test-output/<case>/ (failure-record.ts).
 */
let stack: Stack;
let receiver: Receiver;
let browser: Browser;
let adminContext: BrowserContext;
let admin: Page;
/** The developer who joined by invite, signed in in their own browser. */
let developer: Page;
const contexts: BrowserContext[] = [];

const slug = `acme-${Date.now().toString(36)}`;
const adminEmail = 'ada@example.com';
const adminPassword = 'correct horse battery';

const url = (path: string) => `${stack.base}/console${path}`;

const recorder = new FailureRecorder();

/** The /org requests `page` makes while `run` runs, by path and query. */
async function apiRequests(page: Page, run: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const record = (request: Request) => {
    const { pathname, search } = new URL(request.url());
    if (pathname.startsWith('/org/')) seen.push(`${pathname}${search}`);
  };
  page.on('request', record);
  try {
    await run();
  } finally {
    page.off('request', record);
  }
  return seen;
}

/** The uncaught errors and console errors `page` reports while `run` runs. */
async function pageErrors(page: Page, run: () => Promise<void>): Promise<string[]> {
  const errors: string[] = [];
  const onPageError = (error: Error) => errors.push(`pageerror: ${error.message}`);
  const onConsole = (message: ConsoleMessage) => {
    if (message.type() === 'error') errors.push(`console.error: ${message.text()}`);
  };
  page.on('pageerror', onPageError);
  page.on('console', onConsole);
  try {
    await run();
    // A round trip through the page: what it reported before this has arrived.
    await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 100)));
  } finally {
    page.off('pageerror', onPageError);
    page.off('console', onConsole);
  }
  return errors;
}

/** Reads until the expectation holds: the pages load and refetch on their own time. */
const eventually = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 15_000, interval: 100 });

async function newPage(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 }, acceptDownloads: true });
  context.setDefaultTimeout(15_000);
  contexts.push(context);
  recorder.track(context, contexts.length === 1 ? 'admin' : `page${contexts.length}`);
  return context.newPage();
}

/**
 * A backend of the organization made through the API, not the pages: the admin signs in with a session of its own,
 * makes a service account and a key with `scopes`; `send` calls the API with that key and fails on any status but
 * the ones expected. A case that needs a key makes one: no case depends on a key another case made.
 */
async function backendOf(name: string, scopes: string[]) {
  const signIn = await fetch(`${stack.base}/console/api/sign-in`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: adminEmail, password: adminPassword, organization: slug }),
  });
  expect(signIn.status, await signIn.clone().text()).toBe(200);
  const { csrf_token: csrf } = (await signIn.json()) as { csrf_token: string };
  const cookie = /ent_session=[^;]+/.exec(signIn.headers.get('set-cookie') ?? '')![0];
  const asAdmin = async <T>(path: string, body: object) => {
    const response = await fetch(`${stack.base}${path}`, {
      method: 'POST',
      headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status, `POST ${path}: ${await response.clone().text()}`).toBe(201);
    return (await response.json()) as T;
  };
  const account = await asAdmin<{ service_account_id: string }>('/org/service-accounts', {
    name,
    role: 'developer',
  });
  const { api_key: apiKey } = await asAdmin<{ api_key: string }>(
    `/org/service-accounts/${account.service_account_id}/api-keys`,
    { name, scopes },
  );
  const send = async <T>(method: string, path: string, body?: object, expected: number[] = [200, 201]) => {
    const response = await fetch(`${stack.base}${path}`, {
      method,
      headers: { 'x-api-key': apiKey, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    expect(expected, `${method} ${path}: ${response.status} ${text}`).toContain(response.status);
    return (text ? JSON.parse(text) : null) as T;
  };
  return { apiKey, send };
}

type Backend = Awaited<ReturnType<typeof backendOf>>;

/** The metered feature `api_calls` (made once), a plan granting it, and a subscriber not yet on the plan. */
async function meteredPlanFor(
  backend: Backend,
  plan: { key: string; name: string; limit: number; soft?: boolean },
  subscriberId: string,
) {
  await backend.send(
    'POST',
    '/org/features',
    { key: 'api_calls', name: 'API calls', kind: 'metered' },
    [201, 409],
  );
  const grant = {
    feature: 'api_calls',
    kind: 'metered',
    limit: plan.limit,
    ...(plan.soft ? { soft: true } : {}),
  };
  await backend.send('POST', '/org/plans', {
    key: plan.key,
    name: plan.name,
    kind: 'catalog',
    grants: [grant],
  });
  await backend.send('POST', '/org/subscribers', { subscriber_id: subscriberId });
}

beforeAll(async () => {
  assertChromiumInstalled();
  ensureConsoleBuilt();
  stack = await startStack();
  receiver = await startReceiver();
  browser = await launchChromium();
  admin = await newPage();
  adminContext = admin.context();
}, 180_000);

beforeEach(() => recorder.startCase());

// A failed case says which story it was: its pages' API answers, screenshots, error notices and the stack's logs.
afterEach(async ({ task }) => {
  if (task.result?.state !== 'fail') return;
  const summary = await recorder.write(task.name, { stackOutput: stack?.output() });
  console.error(summary);
}, 30_000);

afterAll(async () => {
  await Promise.all(contexts.map((context) => context.close().catch(() => {})));
  await browser?.close();
  await stack?.stop();
  await receiver?.close();
}, 60_000);

describe('the console', () => {
  it('is served as a production build: no React development runtime, no source paths of this checkout', async () => {
    const scripts = builtScripts();
    expect(scripts.size).toBeGreaterThan(0);
    for (const [file, code] of scripts) expect(devOnlyMarkers(code), file).toEqual([]);
    // What the browser gets is that build.
    const index = await (await fetch(url('/'))).text();
    const entry = /\/console\/assets\/(index-[\w-]+\.js)/.exec(index)?.[1];
    expect(entry && scripts.has(entry), index).toBe(true);
  });

  it('signs up a new organization and opens the app with a session cookie the page cannot read', async () => {
    await admin.goto(url('/sign-up'));
    await admin.getByLabel('Your name', { exact: true }).fill('Ada Admin');
    await admin.getByLabel('Email', { exact: true }).fill(adminEmail);
    await admin.getByLabel('Password', { exact: true }).fill(adminPassword);
    await admin.getByLabel('Organization name').fill('Acme Console');
    await admin.getByLabel('Organization slug').fill(slug);
    await admin.getByRole('button', { name: 'Create organization' }).click();
    await eventually(() => admin.getByTestId('organization-name').textContent()).toBe('Acme Console');
    expect(await admin.getByTestId('whoami').textContent()).toContain('admin');

    const cookie = (await adminContext.cookies()).find((c) => c.name === 'ent_session');
    expect(cookie).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Strict' });
    expect(await admin.evaluate<string>('document.cookie')).not.toContain('ent_session');
  });

  it('creates features and a plan with grants, and edits the grants in place', async () => {
    await admin.goto(url('/features'));
    for (const [key, name, kind, description] of [
      ['sso', 'Single sign-on', 'flag', 'SAML and OIDC sign-in for the customer'],
      ['seats', 'Seats', 'limit', 'Members the customer may invite'],
    ] as const) {
      await admin.getByRole('button', { name: 'New feature' }).click();
      await admin.getByLabel('Feature key').fill(key);
      await admin.getByLabel('Feature name').fill(name);
      await admin.getByLabel('Kind').selectOption(kind);
      await admin.getByLabel('Description').fill(description);
      await admin.getByRole('button', { name: 'Create feature' }).click();
      await admin.getByTestId(`feature-row-${key}`).waitFor();
    }
    // The API's validation error is shown beside the input it names.
    await admin.getByRole('button', { name: 'New feature' }).click();
    await admin.getByLabel('Feature key').fill('Not A Key');
    await admin.getByLabel('Feature name').fill('Bad');
    await admin.getByRole('button', { name: 'Create feature' }).click();
    await eventually(() => admin.locator('.field-error').first().textContent()).toContain('key');
    await admin.getByRole('button', { name: 'Cancel' }).click();
    await screenshot(admin, 'features');

    await admin.goto(url('/plans'));
    await admin.getByRole('button', { name: 'New plan' }).click();
    await admin.getByLabel('Plan key').fill('pro');
    await admin.getByLabel('Plan name').fill('Pro');
    await admin.getByLabel('Grant sso').check();
    await admin.getByLabel('Grant seats').check();
    await admin.getByLabel('Limit of seats').fill('10');
    await admin.getByRole('button', { name: 'Create plan' }).click();
    const pro = admin.getByTestId('plan-row-pro');
    await eventually(() => pro.textContent()).toContain('10');

    await pro.getByRole('button', { name: 'Edit grants' }).click();
    const form = admin.getByTestId('grants-form-pro');
    await form.getByLabel('Limit of seats').fill('25');
    await form.getByRole('button', { name: 'Save grants' }).click();
    await eventually(() => pro.textContent()).toContain('25');

    // An archived plan takes no new subscriptions: the list shows it only when asked to.
    await admin.getByRole('button', { name: 'New plan' }).click();
    await admin.getByLabel('Plan key').fill('legacy');
    await admin.getByLabel('Plan name').fill('Legacy');
    await admin.getByRole('button', { name: 'Create plan' }).click();
    const legacy = admin.getByTestId('plan-row-legacy');
    await legacy.getByRole('button', { name: 'Archive' }).click();
    await legacy.getByRole('button', { name: 'Confirm archive' }).click();
    await legacy.waitFor({ state: 'detached' });
    await admin.reload();
    await pro.waitFor();
    const showArchived = admin.getByLabel('Show archived plans');
    expect(await showArchived.isChecked()).toBe(false);
    expect(await legacy.count()).toBe(0);
    await showArchived.check();
    await eventually(() => legacy.textContent()).toContain('archived');
    await showArchived.uncheck();
    await legacy.waitFor({ state: 'detached' });
  });

  it('creates a subscriber, subscribes it, and watches an override change what it gets', async () => {
    // The plans page was read before the subscription: its counts are in the page's cache.
    await admin.goto(url('/plans'));
    await eventually(() => admin.getByTestId('plan-subscribers-pro').textContent()).toBe('0');
    await admin.getByRole('link', { name: 'Subscribers' }).click();
    await admin.getByRole('button', { name: 'New subscriber' }).click();
    await admin.getByLabel('Subscriber id').fill('acct_42');
    await admin.getByLabel('Subscriber name').fill('Acme Inc.');
    await admin.getByRole('button', { name: 'Create subscriber' }).click();
    await admin.waitForURL(/\/console\/subscribers\/acct_42$/);

    const seats = admin.getByTestId('entitlement-value-seats');
    await eventually(() => seats.textContent()).toBe('0');
    await admin.getByLabel('Plan to subscribe to').selectOption('pro');
    await admin.getByRole('button', { name: 'Subscribe' }).click();
    await eventually(() => seats.textContent()).toBe('25');
    expect(await admin.getByTestId('entitlement-sso').textContent()).toContain('plan');

    // Back on the plans page without a reload: the count from before the subscription is never shown, not even
    // while the list is read again. Every text the count cell has is recorded from the page itself.
    // (A script as text: this project's test code is typed without the DOM.)
    await admin.evaluate(`(() => {
      const seen = (window.countsSeen = []);
      const record = () => {
        const cell = document.querySelector('[data-testid="plan-subscribers-pro"]');
        if (cell && seen.at(-1) !== cell.textContent) seen.push(cell.textContent);
      };
      new MutationObserver(record).observe(document.body, { childList: true, subtree: true, characterData: true });
    })()`);
    await admin.getByRole('link', { name: 'Plans' }).click();
    await eventually(() => admin.getByTestId('plan-subscribers-pro').textContent()).toBe('1');
    expect.soft(await admin.evaluate<string[]>('window.countsSeen')).toEqual(['1']);
    await admin.goBack();
    await eventually(() => seats.textContent()).toBe('25');

    // Subscribing twice is refused: one sentence, and the status, code and request id behind "Details".
    await admin.getByLabel('Plan to subscribe to').selectOption('pro');
    await admin.getByRole('button', { name: 'Subscribe' }).click();
    const refused = admin.getByTestId('subscriptions-panel').getByTestId('error-notice');
    await eventually(() => refused.innerText()).toContain(
      'The subscriber already has an active subscription to the plan "pro".',
    );
    // What is rendered (innerText: not what a closed <details> holds) is the sentence and the toggle.
    expect
      .soft(await refused.innerText())
      .toBe('The subscriber already has an active subscription to the plan "pro".\nDetails');
    const details = refused.getByTestId('error-details');
    expect(await details.getByText(/^req_/).isVisible()).toBe(false);
    await details.getByText('Details').click();
    expect(await details.getByText(/^req_[0-9a-z]{26}$/).isVisible()).toBe(true);
    expect(await details.textContent()).toMatch(/409.*CONFLICT/);

    await admin.getByLabel('Override feature').selectOption('seats');
    await admin.getByLabel('Override limit').fill('100');
    await admin.getByRole('button', { name: 'Save override' }).click();
    await eventually(() => seats.textContent()).toBe('100');
    expect(await admin.getByTestId('entitlement-seats').textContent()).toContain('override');
    await screenshot(admin, 'subscriber');

    // The counts come with the plan list (include=subscriber_count), not from a request per subscriber. Recorded
    // from a load of the plans page alone (the subscriber page left behind reads its own figures on its own time).
    await admin.goto(url('/plans'));
    const requests = await apiRequests(admin, async () => {
      await admin.reload();
      await eventually(() => admin.getByTestId('plan-subscribers-pro').textContent()).toBe('1');
    });
    const planLists = requests.filter((path) => path.startsWith('/org/plans?'));
    expect(planLists.length).toBeGreaterThan(0);
    expect(new Set(planLists)).toEqual(new Set(['/org/plans?limit=100&include=subscriber_count']));
    expect(requests.filter((path) => path.startsWith('/org/subscribers'))).toEqual([]);
    await screenshot(admin, 'plans');
  });

  it('searches subscribers through the API by id prefix or name', async () => {
    await admin.goto(url('/subscribers'));
    await admin.getByRole('button', { name: 'New subscriber' }).click();
    await admin.getByLabel('Subscriber id').fill('beta_7');
    await admin.getByLabel('Subscriber name').fill('Beta Widgets LLC');
    await admin.getByRole('button', { name: 'Create subscriber' }).click();
    await admin.waitForURL(/\/console\/subscribers\/beta_7$/);

    await admin.goto(url('/subscribers'));
    const table = admin.getByTestId('subscribers-table');
    await eventually(() => table.textContent()).toContain('beta_7');
    const search = admin.getByLabel('Search subscribers');
    const idsShown = () => table.locator('tbody code').allTextContents();
    for (const [text, ids] of [
      ['acme', ['acct_42']],
      ['ACCT_4', ['acct_42']],
      ['widgets', ['beta_7']],
      ['', ['acct_42', 'beta_7']],
    ] as const) {
      // Each search is one API request (after a pause in typing), not a filter of the loaded rows.
      const asked = text
        ? admin.waitForRequest((request) => {
            const { pathname, searchParams } = new URL(request.url());
            return pathname === '/org/subscribers' && searchParams.get('search') === text;
          })
        : Promise.resolve(null);
      await search.fill(text);
      await asked;
      await eventually(idsShown).toEqual(ids);
    }
    await search.fill('acct_4x');
    await eventually(() => table.textContent()).toContain('No subscriber');
    await search.fill('');
  });

  it('invites a viewer and a developer, who join in their own browsers and are offered only what their role allows', async () => {
    const invite = async (role: 'viewer' | 'developer', email?: string) => {
      await admin.goto(url('/members'));
      await admin.getByLabel('Invite role').selectOption(role);
      if (email) await admin.getByLabel('Invite email (optional)').fill(email);
      await admin.getByRole('button', { name: 'Create invite' }).click();
      const link = (await admin.getByTestId('new-invite-link').textContent()) ?? '';
      expect(link).toMatch(new RegExp(`^${stack.base}/console/join/`));
      return link;
    };

    const viewerLink = await invite('viewer');
    const viewer = await newPage();
    await viewer.goto(viewerLink);
    expect(await viewer.getByTestId('invite-status').textContent()).toContain('viewer');
    await screenshot(viewer, 'join');
    await viewer.getByLabel('Email', { exact: true }).fill('vera@example.com');
    await viewer.getByLabel('Your name', { exact: true }).fill('Vera Viewer');
    await viewer.getByLabel('Password', { exact: true }).fill('viewer password 1');
    await viewer.getByRole('button', { name: 'Accept invite' }).click();
    await eventually(() => viewer.getByTestId('whoami').textContent()).toContain('viewer');

    // A used link says so.
    const again = await newPage();
    await again.goto(viewerLink);
    await eventually(() => again.getByTestId('invite-status').textContent()).toContain('already been used');

    await viewer.goto(url('/features'));
    await viewer.getByTestId('feature-row-sso').waitFor();
    await viewer.goto(url('/subscribers/acct_42'));
    await eventually(() => viewer.getByTestId('entitlement-value-seats').textContent()).toBe('100');
    await viewer.goto(url('/plans'));
    await viewer.getByTestId('plan-row-pro').waitFor();
    await viewer.goto(url('/service-accounts'));
    await viewer.getByRole('heading', { name: 'Service accounts' }).waitFor();
    await viewer.goto(url('/members'));
    await viewer.getByTestId('members-table').waitFor();
    await viewer.goto(url('/webhook'));
    await viewer.getByRole('heading', { name: 'Webhook' }).waitFor();
    // Not a single write control on any page a viewer opens, and no audit log in the nav.
    for (const path of [
      '/features',
      '/plans',
      '/subscribers',
      '/subscribers/acct_42',
      '/service-accounts',
      '/members',
      '/webhook',
    ]) {
      await viewer.goto(url(path));
      await viewer.getByRole('heading', { level: 1 }).waitFor();
      await viewer.waitForLoadState('networkidle');
      const writes = viewer.getByRole('button', {
        name: /^(New |Create |Edit|Subscribe|Save|Archive|Rename|Change|Cancel subscription|Delete|Revoke|Suspend|Set webhook|Rotate|Disable|Enable)/,
      });
      expect(await writes.count(), `write buttons on ${path}`).toBe(0);
    }
    expect(await viewer.getByRole('link', { name: 'Audit log' }).count()).toBe(0);

    const developerLink = await invite('developer', 'dev@example.com');
    developer = await newPage();
    await developer.goto(developerLink);
    expect(await developer.getByLabel('Email', { exact: true }).count()).toBe(0);
    await developer.getByLabel('Password', { exact: true }).fill('developer password 1');
    await developer.getByRole('button', { name: 'Accept invite' }).click();
    await eventually(() => developer.getByTestId('whoami').textContent()).toContain('developer');
    expect(await developer.getByRole('link', { name: 'Audit log' }).count()).toBe(0);
    await developer.goto(url('/features'));
    await developer.getByRole('button', { name: 'New feature' }).waitFor();
    await developer.goto(url('/members'));
    await developer.getByTestId('members-table').waitFor();
    expect(await developer.getByRole('combobox', { name: /^Role of / }).count()).toBe(0);
    expect(await developer.getByRole('button', { name: /Suspend|Create invite/ }).count()).toBe(0);
    await developer.goto(url('/audit'));
    await eventually(() => developer.getByRole('alert').textContent()).toContain('Only admins');

    await developer.goto(url('/settings'));
    await developer.getByLabel('Current password').fill('developer password 1');
    await developer.getByLabel('New password', { exact: true }).fill('developer password 2');
    await developer.getByLabel('Repeat new password').fill('developer password 2');
    await developer.getByRole('button', { name: 'Change password' }).click();
    await eventually(() => developer.getByRole('status').textContent()).toContain('Password changed');

    // A live invite, for the picture: its link, like the others, is on the host this browser reached.
    await invite('viewer', 'sam@example.com');
    await admin.getByTestId('member-dev@example.com').waitFor();
    await screenshot(admin, 'members');
  });

  it('creates a key that is shown once, and revokes it', async () => {
    await admin.goto(url('/service-accounts'));
    await admin.getByRole('button', { name: 'New service account' }).click();
    await admin.getByLabel('Service account name').fill('backend');
    await admin.getByLabel('Service account role').selectOption('developer');
    await admin.getByRole('button', { name: 'Create service account' }).click();
    const account = admin.getByTestId('service-account-backend');
    await account.getByRole('button', { name: 'Create key' }).click();
    await account.getByLabel('Key name').fill('production');
    await account.getByLabel('catalog:read').check();
    await account.getByRole('button', { name: 'Create key' }).click();
    const plaintext = (await admin.getByTestId('new-api-key-value').textContent()) ?? '';
    expect(plaintext).toMatch(/^svc-mk-1-/);
    await screenshot(admin, 'service-accounts');

    // The key works from a server, once.
    const asServer = await fetch(`${stack.base}/org/features`, { headers: { 'x-api-key': plaintext } });
    expect(asServer.status).toBe(200);

    await admin.getByRole('button', { name: 'I have stored it' }).click();
    await admin.reload();
    await account.getByRole('button', { name: 'Create key' }).waitFor();
    expect(await admin.content()).not.toContain(plaintext);

    const prefix = plaintext.slice(0, 'svc-mk-1-'.length + 8);
    const row = admin.getByTestId(`api-key-${prefix}`);
    await row.getByRole('button', { name: 'Revoke' }).click();
    await row.getByRole('button', { name: 'Confirm revoke' }).click();
    await eventually(() => row.textContent()).toContain('revoked');
    await eventually(
      async () => (await fetch(`${stack.base}/org/features`, { headers: { 'x-api-key': plaintext } })).status,
    ).toBe(401);
  });

  it('sets the webhook, shows its signing secret once, and lists its deliveries', async () => {
    // A new organization has no webhook: an empty state, and no failed request for the browser to log.
    const errors = await pageErrors(admin, async () => {
      await admin.goto(url('/webhook'));
      await admin.getByText('No webhook is set.').waitFor();
    });
    expect(errors).toEqual([]);
    await admin.getByLabel('Endpoint URL').fill(`${receiver.url}/hooks`);
    await admin.getByRole('button', { name: 'Set webhook' }).click();
    expect(await admin.getByTestId('webhook-secret-value').textContent()).toMatch(/^whsec_/);
    await admin.getByRole('button', { name: 'I have stored it' }).click();

    // A write sends an event; the worker delivers it to the receiver and the log says so.
    await admin.goto(url('/features'));
    await admin.getByRole('button', { name: 'New feature' }).click();
    await admin.getByLabel('Feature key').fill('audit_export');
    await admin.getByLabel('Feature name').fill('Audit export');
    await admin.getByRole('button', { name: 'Create feature' }).click();
    await admin.getByTestId('feature-row-audit_export').waitFor();
    await eventually(async () => receiver.received.length).toBeGreaterThan(0);
    await admin.goto(url('/webhook'));
    await eventually(async () => {
      await admin.reload();
      return admin.getByTestId('deliveries-table').textContent();
    }).toContain('succeeded');

    await admin.getByRole('button', { name: 'Disable' }).click();
    await eventually(() => admin.getByTestId('webhook-settings').textContent()).toContain('disabled');
    await admin.getByRole('button', { name: 'Enable' }).click();
    await eventually(() => admin.getByTestId('webhook-settings').textContent()).toContain('enabled');
    await screenshot(admin, 'webhook');
  });

  it("finds the console's writes in the audit log as member_session, with each change as from → to, and exports them", async () => {
    await admin.goto(url('/audit'));
    await admin.getByTestId('audit-table').waitFor();
    const sessionRow = (route: string) =>
      admin.locator(`[data-testid="audit-row"][data-route="${route}"][data-auth-type="member_session"]`);
    for (const route of [
      '/org/features',
      '/org/plans',
      '/org/plans/{key}',
      '/org/subscribers',
      '/org/subscribers/{subscriber_id}/subscriptions',
      '/org/subscribers/{subscriber_id}/overrides/{feature_key}',
      '/org/invites',
      '/org/service-accounts/{service_account_id}/api-keys',
      '/org/webhook',
    ]) {
      expect(await sessionRow(route).count(), route).toBeGreaterThan(0);
    }

    await admin.getByLabel('Route template').fill('/org/plans/{key}');
    await admin.getByLabel('Method').selectOption('PATCH');
    await admin.getByRole('button', { name: 'Apply filters' }).click();
    await eventually(() => admin.getByTestId('audit-row').count()).toBe(1);
    await admin.getByTestId('audit-row').getByRole('button', { name: 'Details' }).click();
    const details = admin.locator('[data-testid^="audit-details-"]');
    await eventually(() => details.textContent()).toContain('grants.seats');
    expect(await details.textContent()).toMatch(/limit 10.*→.*limit 25/);
    await screenshot(admin, 'audit');

    const [csv] = await Promise.all([
      admin.waitForEvent('download'),
      admin.getByRole('button', { name: 'Export CSV' }).click(),
    ]);
    const csvText = readFileSync((await csv.path())!, 'utf8');
    expect(csvText.split('\r\n')[0]).toContain('actor_auth_type');
    expect(csvText).toContain('member_session');
    const [json] = await Promise.all([
      admin.waitForEvent('download'),
      admin.getByRole('button', { name: 'Export JSON' }).click(),
    ]);
    const exported = JSON.parse(readFileSync((await json.path())!, 'utf8')) as {
      audit_events: { route: string }[];
    };
    expect(exported.audit_events.map((e) => e.route)).toEqual(['/org/plans/{key}']);
  });

  it("renders this month's usage day by day against its allotment, and past months", async () => {
    await admin.goto(url('/usage'));
    const chart = admin.getByTestId('usage-chart');
    await chart.locator('svg.recharts-surface').first().waitFor();
    // The evals of the "what this subscriber gets" panel were counted (the count may lag about a second).
    await eventually(async () => {
      await admin.reload();
      return Number((await admin.getByTestId('usage-count').textContent())?.replace(/\D/g, ''));
    }).toBeGreaterThan(0);
    // This month's line starts at zero on the 1st and reaches today's live count.
    await eventually(
      async () => (await chart.locator('path.recharts-area-curve').getAttribute('d')) ?? '',
    ).toMatch(/^M[\d.]+,[\d.]+L/);
    // Scaled to the few evals of a new organization, not to its allotment: the line rises across most of the
    // plot instead of lying on zero, and the 80% and 100% lines, far above, are named under the chart.
    const curve = (await chart.locator('path.recharts-area-curve').getAttribute('d')) ?? '';
    const heights = [...curve.matchAll(/[ML][\d.]+,([\d.]+)/g)].map((match) => Number(match[1]));
    const plot = (await chart.locator('.recharts-cartesian-grid').boundingBox())!;
    expect((Math.max(...heights) - Math.min(...heights)) / plot.height).toBeGreaterThan(0.4);
    expect(await chart.locator('.recharts-reference-line').count()).toBe(0);
    expect(await chart.getByTestId('usage-chart-note').textContent()).toMatch(
      /80% and 100% lines \(200\D?000 and 250\D?000 evals\)/,
    );
    await screenshot(admin, 'usage-new');
    // A new organization has no earlier month yet.
    expect(await admin.getByTestId('usage-history-note').textContent()).toContain('No earlier month');

    // Three recorded months and a month at 85% of the allotment, as the worker and the gate would leave them.
    const [, ...past] = await seedUsageHistory(stack, slug, 212_345);
    await admin.reload();
    // The count is written in the browser's locale: compared by its digits.
    await eventually(async () =>
      Number((await admin.getByTestId('usage-count').textContent())?.replace(/\D/g, '')),
    ).toBe(212_345);
    expect(await admin.getByTestId('usage-summary').textContent()).toContain('80% used');
    const history = admin.getByTestId('usage-history');
    await eventually(() => history.locator('tbody tr').count()).toBe(3);
    expect(await admin.getByTestId(`usage-month-${past[0]}`).textContent()).toMatch(
      /143\D?210.*250\D?000.*57%/,
    );
    expect(await admin.getByTestId(`usage-month-${past[1]}`).textContent()).toMatch(
      /251\D?004.*250\D?000.*100%/,
    );
    await chart.locator('path.recharts-area-curve').waitFor();
    // At 85% of the allotment both lines are in reach, and drawn.
    await eventually(() => chart.locator('.recharts-reference-line').count()).toBe(2);
    expect(await chart.textContent()).toContain('80%');
    expect(await chart.getByTestId('usage-chart-note').count()).toBe(0);
    await screenshot(admin, 'usage');
  });

  it('goes to sign-in with no error in the page when the session ends elsewhere, and back after signing in', async () => {
    await admin.goto(url('/features'));
    await admin.getByTestId('feature-row-sso').waitFor();
    // The session ends outside this page (as at a password change elsewhere or a suspension).
    const session = (await (await adminContext.request.get(url('/api/session'))).json()) as {
      csrf_token: string;
    };
    const ended = await adminContext.request.post(url('/api/sign-out'), {
      headers: { origin: stack.base, 'x-csrf-token': session.csrf_token },
    });
    expect(ended.ok()).toBe(true);

    const errors = await pageErrors(admin, async () => {
      await admin.getByRole('link', { name: 'Plans' }).click();
      await admin.waitForURL(/\/console\/sign-in\?next=%2Fplans$/);
      await admin.getByRole('button', { name: 'Sign in' }).waitFor();
    });
    // The browser's own line for the refused request is expected; nothing else is.
    expect(errors.filter((error) => !/Failed to load resource: .* 401/.test(error))).toEqual([]);
    // Rendered with the sign-in page (waited for above): read as it is, without waiting.
    expect
      .soft(await admin.getByTestId('left-notice').allTextContents())
      .toEqual(['Your session has ended. Sign in again to continue.']);

    await admin.getByLabel('Email').fill(adminEmail);
    await admin.getByLabel('Password').fill(adminPassword);
    await admin.getByRole('button', { name: 'Sign in' }).click();
    await admin.waitForURL(/\/console\/plans$/);
    await admin.getByTestId('plan-row-pro').waitFor();
  });

  it('signs out with no error in the page, signs in again, and says how long to wait after too many failures', async () => {
    const errors = await pageErrors(admin, async () => {
      await admin.getByRole('button', { name: 'Sign out' }).click();
      await admin.waitForURL(/\/console\/sign-in/);
      await admin.getByRole('button', { name: 'Sign in' }).waitFor();
    });
    expect(errors).toEqual([]);
    expect.soft(await admin.getByTestId('left-notice').allTextContents()).toEqual(['You are signed out.']);
    await screenshot(admin, 'signed-out');
    await admin.goto(url('/features'));
    await admin.waitForURL(/\/console\/sign-in/);
    await screenshot(admin, 'sign-in');

    await admin.getByLabel('Email').fill(adminEmail);
    await admin.getByLabel('Password').fill(adminPassword);
    await admin.getByRole('button', { name: 'Sign in' }).click();
    await admin.waitForURL(/\/console\/features$/);
    await admin.getByTestId('feature-row-sso').waitFor();

    const stranger = await newPage();
    await stranger.goto(url('/sign-in'));
    await stranger.getByLabel('Email').fill('nobody@example.com');
    for (let attempt = 0; attempt < 6; attempt++) {
      await stranger.getByLabel('Password').fill('wrong password');
      const answered = stranger.waitForResponse((response) =>
        response.url().endsWith('/console/api/sign-in'),
      );
      await stranger.getByRole('button', { name: 'Sign in' }).click();
      if ((await answered).status() === 429) break;
      // A wrong password is not left in the field; the email is, to type the password again.
      await eventually(() => stranger.getByLabel('Password').inputValue()).toBe('');
      expect(await stranger.getByLabel('Email').inputValue()).toBe('nobody@example.com');
    }
    await eventually(() => stranger.getByTestId('rate-limited').textContent()).toMatch(/Try again in \d+ s/);
  });
  it('removes a member after listing the keys they minted, and those keys stop working', async () => {
    await developer.goto(url('/service-accounts'));
    await developer.getByRole('button', { name: 'New service account' }).click();
    await developer.getByLabel('Service account name').fill('laptop');
    await developer.getByLabel('Service account role').selectOption('developer');
    await developer.getByRole('button', { name: 'Create service account' }).click();
    const account = developer.getByTestId('service-account-laptop');
    await account.getByRole('button', { name: 'Create key' }).click();
    await account.getByLabel('Key name').fill('copied');
    await account.getByLabel('catalog:read').check();
    await account.getByRole('button', { name: 'Create key' }).click();
    const plaintext = (await developer.getByTestId('new-api-key-value').textContent()) ?? '';
    expect(plaintext).toMatch(/^svc-mk-1-/);
    const prefix = plaintext.slice(0, 'svc-mk-1-'.length + 8);
    await eventually(() =>
      account.getByTestId(`api-key-${prefix}`).getByTestId('minted-by').textContent(),
    ).toBe('dev@example.com');
    const features = () => fetch(`${stack.base}/org/features`, { headers: { 'x-api-key': plaintext } });
    expect((await features()).status).toBe(200);

    await admin.goto(url('/members'));
    const row = admin.getByTestId('member-dev@example.com');
    await row.getByRole('button', { name: 'Remove' }).click();
    const confirm = admin.getByTestId('confirm-dev@example.com');
    await eventually(() => confirm.getByTestId('minted-keys').textContent()).toContain(prefix);
    expect(await confirm.getByRole('checkbox').isChecked()).toBe(true);
    await confirm.getByRole('button', { name: 'Confirm: remove member' }).click();
    await eventually(() => row.textContent()).toContain('removed');
    expect((await features()).status).toBe(401);
  });

  it('asks a person in several organizations which one to open, and opens the one picked', async () => {
    const founder = await newPage();
    await founder.goto(url('/sign-up'));
    await founder.getByLabel('Email', { exact: true }).fill(adminEmail);
    await founder.getByLabel('Password', { exact: true }).fill(adminPassword);
    await founder.getByLabel('Organization name').fill('Acme Labs');
    await founder.getByLabel('Organization slug').fill(`${slug}-labs`);
    await founder.getByRole('button', { name: 'Create organization' }).click();
    await eventually(() => founder.getByTestId('organization-name').textContent()).toBe('Acme Labs');

    const person = await newPage();
    await person.goto(url('/sign-in'));
    await person.getByLabel('Email').fill(adminEmail);
    await person.getByLabel('Password').fill(adminPassword);
    await person.getByRole('button', { name: 'Sign in' }).click();
    const choice = person.getByTestId('organization-choice');
    await eventually(() => choice.getByRole('button').allTextContents()).toEqual([
      `Acme Console (${slug})`,
      `Acme Labs (${slug}-labs)`,
    ]);
    await screenshot(person, 'sign-in-organizations');
    await choice.getByRole('button', { name: /Acme Labs/ }).click();
    await eventually(() => person.getByTestId('organization-name').textContent()).toBe('Acme Labs');
  });

  it('meters a feature: a metered grant, usage reported with a key, the bar with its overage, a correction and past periods', async () => {
    await admin.goto(url('/features'));
    await admin.getByRole('button', { name: 'New feature' }).click();
    await admin.getByLabel('Feature key').fill('api_calls');
    await admin.getByLabel('Feature name').fill('API calls');
    await admin.getByLabel('Kind').selectOption('metered');
    await admin.getByRole('button', { name: 'Create feature' }).click();
    await eventually(() => admin.getByTestId('feature-row-api_calls').textContent()).toContain('metered');

    // A hard limit of 100 a month, then edited in place to 1,000 a month, soft.
    await admin.goto(url('/plans'));
    await admin.getByRole('button', { name: 'New plan' }).click();
    await admin.getByLabel('Plan key').fill('metered');
    await admin.getByLabel('Plan name').fill('Metered');
    await admin.getByLabel('Grant api_calls').check();
    await admin.getByLabel('Limit of api_calls').fill('100');
    await admin.getByRole('button', { name: 'Create plan' }).click();
    const grant = admin.getByTestId('plan-row-metered').getByTestId('grant-api_calls');
    await eventually(() => grant.textContent()).toBe('api_calls100 / month');
    await admin.getByTestId('plan-row-metered').getByRole('button', { name: 'Edit grants' }).click();
    const form = admin.getByTestId('grants-form-metered');
    expect(await form.getByLabel('Reset of api_calls').inputValue()).toBe('month');
    await form.getByLabel('Limit of api_calls').fill('1000');
    await form.getByLabel('Soft limit api_calls').check();
    await form.getByRole('button', { name: 'Save grants' }).click();
    await eventually(() => grant.textContent()).toMatch(/^api_calls1\D?000 \/ month, soft$/);

    await admin.goto(url('/subscribers'));
    await admin.getByRole('button', { name: 'New subscriber' }).click();
    await admin.getByLabel('Subscriber id').fill('meter_1');
    await admin.getByRole('button', { name: 'Create subscriber' }).click();
    await admin.waitForURL(/\/console\/subscribers\/meter_1$/);
    await admin.getByLabel('Plan to subscribe to').selectOption('metered');
    await admin.getByRole('button', { name: 'Subscribe' }).click();
    const figures = admin.getByTestId('usage-figures-api_calls');
    await eventually(() => figures.textContent()).toMatch(/^0 of 1\D?000 \(0%\)$/);

    // The customer's backend reports usage with a key: 1,200 that happened, then a consume of 50.
    await admin.goto(url('/service-accounts'));
    await admin.getByRole('button', { name: 'New service account' }).click();
    await admin.getByLabel('Service account name').fill('metering');
    await admin.getByLabel('Service account role').selectOption('developer');
    await admin.getByRole('button', { name: 'Create service account' }).click();
    const account = admin.getByTestId('service-account-metering');
    await account.getByRole('button', { name: 'Create key' }).click();
    await account.getByLabel('Key name').fill('usage');
    await account.getByLabel('check', { exact: true }).check();
    await account.getByLabel('usage:write').check();
    await account.getByRole('button', { name: 'Create key' }).click();
    const key = (await admin.getByTestId('new-api-key-value').textContent()) ?? '';
    await admin.getByRole('button', { name: 'I have stored it' }).click();
    const asBackend = async (path: string, body: object) => {
      const response = await fetch(`${stack.base}/org/subscribers/meter_1${path}`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(response.status, await response.clone().text()).toBe(200);
      return (await response.json()) as { used: number; allowed: boolean };
    };
    expect(await asBackend('/usage', { feature: 'api_calls', delta: 1200 })).toMatchObject({ used: 1200 });
    expect(await asBackend('/entitlements/check', { feature: 'api_calls', consume: 50 })).toMatchObject({
      used: 1250,
      allowed: true,
    });

    // Past the soft limit: the bar shows the limit and the overage beyond it, and when the period resets.
    await seedPastPeriod(stack, slug, { subscriberId: 'meter_1', feature: 'api_calls', used: 870 });
    await admin.goto(url('/subscribers/meter_1'));
    await eventually(() => figures.textContent()).toMatch(/^1\D?250 of 1\D?000 \(125%\)$/);
    const meter = admin.getByTestId('usage-api_calls');
    expect(await meter.textContent()).toMatch(/overage 250/);
    expect(await meter.getByTestId('usage-overage-api_calls').isVisible()).toBe(true);
    expect(await meter.getByRole('meter').getAttribute('aria-valuenow')).toBe('1250');
    // The value stays within the meter's range (ARIA): past the limit, the range is the use.
    expect(await meter.getByRole('meter').getAttribute('aria-valuemax')).toBe('1250');
    expect(await meter.getByTestId('usage-reset-api_calls').textContent()).toMatch(/; resets on /);

    // The period before, with its final figure.
    await meter.getByRole('button', { name: 'Past periods' }).click();
    const periods = meter.getByTestId('usage-periods-api_calls');
    await eventually(() => periods.getByTestId('usage-period').count()).toBe(1);
    expect(await periods.getByTestId('usage-period').textContent()).toMatch(/870$/);
    await screenshot(admin, 'metered-usage');

    // A correction the API refuses shows its sentence; an accepted one moves the bar.
    await meter.getByRole('button', { name: 'Correct usage' }).click();
    const correction = meter.getByTestId('usage-correction-api_calls');
    await correction.getByLabel('Corrected usage of api_calls').fill('10000000000000');
    await correction.getByRole('button', { name: 'Set usage' }).click();
    await correction.getByRole('button', { name: /^Confirm: set usage to / }).click();
    await eventually(() => correction.getByTestId('error-sentence').textContent()).toBe(
      'Used must be <= 1000000000000.',
    );
    expect(await figures.textContent()).toMatch(/^1\D?250 of/);
    await correction.getByLabel('Corrected usage of api_calls').fill('400');
    await correction.getByRole('button', { name: 'Set usage' }).click();
    await correction.getByRole('button', { name: 'Confirm: set usage to 400' }).click();
    await eventually(() => figures.textContent()).toMatch(/^400 of 1\D?000 \(40%\)$/);
    await correction.waitFor({ state: 'detached' });
    expect(await meter.getByTestId('usage-overage-api_calls').count()).toBe(0);
    // The next consume on the gateway counts from the corrected figure.
    expect(await asBackend('/entitlements/check', { feature: 'api_calls', consume: 1 })).toMatchObject({
      used: 401,
    });

    // An override replaces the limit only: the period, its usage and the soft flag stay.
    await admin.getByLabel('Override feature').selectOption('api_calls');
    await admin.getByLabel('Override limit').fill('5000');
    await admin.getByRole('button', { name: 'Save override' }).click();
    await eventually(() => figures.textContent()).toMatch(/^401 of 5\D?000 \(8%\)$/);
    expect(await admin.getByTestId('override-api_calls').textContent()).toMatch(/5\D?000 per period/);
    expect(await meter.textContent()).toMatch(/soft limit.*override/);

    // A viewer sees the bar and is offered no correction (it needs subscribers:write).
    const viewer = await newPage();
    await viewer.goto(url('/sign-in'));
    await viewer.getByLabel('Email').fill('vera@example.com');
    await viewer.getByLabel('Password').fill('viewer password 1');
    await viewer.getByRole('button', { name: 'Sign in' }).click();
    await eventually(() => viewer.getByTestId('whoami').textContent()).toContain('viewer');
    await viewer.goto(url('/subscribers/meter_1'));
    await eventually(() => viewer.getByTestId('usage-figures-api_calls').textContent()).toMatch(/^401 of/);
    expect(await viewer.getByRole('button', { name: 'Correct usage' }).count()).toBe(0);
    // The longest case of the file (about 20 s on an idle machine): a budget of its own.
  }, 90_000);

  it('reads again what was being read when a subscribe was answered: the page opened just before it', async () => {
    // The page's first reads of the gateway's figures are sent before the subscribe and answered after it (a slow
    // gateway under load): they answer what was there before. Nothing they answered may stay on the page.
    const backend = await backendOf('race backend', ['catalog:write', 'subscribers:write']);
    await meteredPlanFor(backend, { key: 'raced', name: 'Raced', limit: 3000 }, 'race_1');

    let answered!: () => void;
    const subscribeAnswered = new Promise<void>((resolve) => (answered = resolve));
    const held: string[] = [];
    await admin.route('**/org/subscribers/race_1/subscriptions', async (route) => {
      const response = await route.fetch();
      await route.fulfill({ response });
      if (route.request().method() === 'POST') answered();
    });
    // The first read of each is made now (before the subscribe) and its answer held until the subscribe's is in.
    for (const read of ['usage', 'entitlements?all=true']) {
      await admin.route(`**/org/subscribers/race_1/${read}`, async (route) => {
        if (held.includes(read)) return route.continue();
        held.push(read);
        const response = await route.fetch();
        await subscribeAnswered;
        await route.fulfill({ response });
      });
    }
    try {
      await admin.goto(url('/subscribers/race_1'));
      await admin.getByLabel('Plan to subscribe to').selectOption('raced');
      await eventually(async () => held.length).toBe(2);
      await admin.getByRole('button', { name: 'Subscribe' }).click();
      await eventually(() => admin.getByTestId('entitlement-value-api_calls').textContent()).toMatch(
        /^0 of 3\D?000 used$/,
      );
      await eventually(() => admin.getByTestId('usage-figures-api_calls').textContent()).toMatch(
        /^0 of 3\D?000 \(0%\)$/,
      );
    } finally {
      await admin.unrouteAll({ behavior: 'wait' });
    }
  });

  it('reads the figures again when the read after a subscribe came before the subscribe reached the gateway', async () => {
    // A write answers 2xx even when its write-through to Redis failed (the outbox relay publishes it within
    // seconds): the read right after its answer is then the one from before the write. Here that read is answered
    // with the figures from before the subscribe, as such a gateway would answer; the page must not keep them.
    const backend = await backendOf('late backend', [
      'catalog:write',
      'subscribers:read',
      'subscribers:write',
    ]);
    await meteredPlanFor(backend, { key: 'late', name: 'Late', limit: 2000 }, 'late_1');
    const before = JSON.stringify(
      await backend.send('GET', '/org/subscribers/late_1/usage', undefined, [200]),
    );

    let subscribed = false;
    let staleServed = false;
    await admin.route('**/org/subscribers/late_1/subscriptions', async (route) => {
      const response = await route.fetch();
      if (route.request().method() === 'POST' && response.ok()) subscribed = true;
      await route.fulfill({ response });
    });
    await admin.route('**/org/subscribers/late_1/usage', async (route) => {
      if (!subscribed || staleServed) return route.continue();
      staleServed = true;
      await route.fulfill({ status: 200, contentType: 'application/json', body: before });
    });
    try {
      await admin.goto(url('/subscribers/late_1'));
      const figures = admin.getByTestId('usage-figures-api_calls');
      await eventually(() => figures.textContent()).toBe('0 of 0');
      await admin.getByLabel('Plan to subscribe to').selectOption('late');
      await admin.getByRole('button', { name: 'Subscribe' }).click();
      await eventually(() => figures.textContent()).toMatch(/^0 of 2\D?000 \(0%\)$/);
      expect(staleServed).toBe(true);
    } finally {
      await admin.unrouteAll({ behavior: 'wait' });
    }
  });

  it('adds a credit that the gateway spends after the allowance, and voids it keeping what it gave', async () => {
    // Its own subscriber and key, made through the API: 401 of an allowance of 5,000 a month (soft) used.
    const backend = await backendOf('credits backend', [
      'check',
      'usage:write',
      'catalog:write',
      'subscribers:write',
    ]);
    await meteredPlanFor(backend, { key: 'credited', name: 'Credited', limit: 5000, soft: true }, 'credit_1');
    await backend.send('POST', '/org/subscribers/credit_1/subscriptions', { plan_id: 'credited' });
    await backend.send('POST', '/org/subscribers/credit_1/usage', { feature: 'api_calls', delta: 401 });
    const consume = async (amount: number) =>
      backend.send<{ used: number; remaining: number; credits: { remaining: number }[] }>(
        'POST',
        '/org/subscribers/credit_1/entitlements/check',
        { feature: 'api_calls', consume: amount },
        [200],
      );
    await admin.goto(url('/subscribers/credit_1'));
    const panel = admin.getByTestId('credits-panel');
    await eventually(() => panel.textContent()).toContain('No credits.');
    await panel.getByLabel('Credit feature').selectOption('api_calls');
    await panel.getByLabel('Amount').fill('0');
    await panel.getByRole('button', { name: 'Add credit' }).click();
    expect(await panel.getByText('A whole number above 0.').count()).toBe(1);
    await panel.getByLabel('Amount').fill('500');
    await panel.getByLabel('Name (optional)').fill('Top-up 17');
    await panel.getByRole('button', { name: 'Add credit' }).click();
    const row = panel.locator('[data-testid^="credit-cr_"]');
    await eventually(() => row.textContent()).toMatch(/Top-up 17.*500 of 500.*never.*active/);

    // Read on the gateway at once (read-your-writes): the allowance of 5,000 with 401 used, then the credit.
    expect(await consume(4700)).toMatchObject({ used: 5101, remaining: 399, credits: [{ remaining: 399 }] });
    await admin.reload();
    await eventually(() => row.textContent()).toMatch(/399 of 500/);

    // Voided: it counts for nothing from now on; what it gave stays spent.
    await row.getByRole('button', { name: 'Void credit' }).click();
    await row.getByRole('button', { name: 'Confirm void' }).click();
    await eventually(() => row.textContent()).toMatch(/0 of 500.*voided/);
    expect(await row.getByRole('button', { name: 'Void credit' }).count()).toBe(0);
    expect(await consume(1)).toMatchObject({ used: 5102, credits: [] });
    await screenshot(admin, 'credits');
  }, 60_000);

  it("never shows a subscriber's entitlements from before a plan's grants were edited", async () => {
    // The subscriber page is read, the plan's grants are edited on the plans page, and the subscriber page is opened
    // again without a reload: what it got before the edit is in the page's cache. Every text the figure's cell has
    // is recorded from the page itself (a script as text: this project's test code is typed without the DOM).
    const backend = await backendOf('regrant backend', ['catalog:write', 'subscribers:write']);
    await meteredPlanFor(backend, { key: 'regrant', name: 'Regrant', limit: 1000 }, 'regrant_1');
    await backend.send('POST', '/org/subscribers/regrant_1/subscriptions', { plan_id: 'regrant' });
    await admin.goto(url('/subscribers/regrant_1'));
    const figure = admin.getByTestId('entitlement-value-api_calls');
    await eventually(() => figure.textContent()).toMatch(/^0 of 1\D?000 used$/);
    await admin.evaluate(`(() => {
      const seen = (window.figuresSeen = []);
      const record = () => {
        const cell = document.querySelector('[data-testid="entitlement-value-api_calls"]');
        if (cell && seen.at(-1) !== cell.textContent) seen.push(cell.textContent);
      };
      new MutationObserver(record).observe(document.body, { childList: true, subtree: true, characterData: true });
    })()`);

    await admin.getByRole('link', { name: 'Plans' }).click();
    const plan = admin.getByTestId('plan-row-regrant');
    await plan.getByRole('button', { name: 'Edit grants' }).click();
    await admin.getByTestId('grants-form-regrant').getByLabel('Limit of api_calls').fill('2000');
    await admin.getByTestId('grants-form-regrant').getByRole('button', { name: 'Save grants' }).click();
    await eventually(() => plan.textContent()).toMatch(/2\D?000/);

    await admin.goBack();
    await eventually(() => figure.textContent()).toMatch(/^0 of 2\D?000 used$/);
    const seen = await admin.evaluate<string[]>('window.figuresSeen');
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((text) => !/^0 of 2\D?000 used$/.test(text))).toEqual([]);
  }, 60_000);

  it('saves only what was edited: a name changed elsewhere while the form was open stays', async () => {
    // Found by a probe: the edit form sent both fields, so saving a description wrote the old name back.
    const backend = await backendOf('rename backend', ['catalog:read', 'catalog:write']);
    await backend.send('POST', '/org/features', { key: 'renamed', name: 'Before', kind: 'flag' });
    await admin.goto(url('/features'));
    const row = admin.getByTestId('feature-row-renamed');
    await row.getByRole('button', { name: 'Edit' }).click();
    await admin.getByLabel('Description of renamed').fill('edited in the console');
    await backend.send('PATCH', '/org/features/renamed', { name: 'Renamed elsewhere' });
    await admin.getByRole('button', { name: 'Save' }).click();
    await eventually(() => admin.getByTestId('feature-row-renamed').textContent()).toContain(
      'edited in the console',
    );
    const feature = await backend.send<{ name: string; description: string }>('GET', '/org/features/renamed');
    expect(feature).toMatchObject({ name: 'Renamed elsewhere', description: 'edited in the console' });
  }, 60_000);
});
