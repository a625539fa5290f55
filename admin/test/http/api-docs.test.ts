import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { createAdminContext, type AdminTestContext } from '../../../test-support/admin-context.ts';
import { launchChromium } from '../../../test-support/chromium.ts';

/** The API reference at /docs: Swagger UI rendering /openapi.json, served by admin (through the gateway too). */
let ctx: AdminTestContext;
let browser: Browser;

beforeAll(async () => {
  ctx = await createAdminContext();
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await ctx?.close();
});

describe('API reference', () => {
  it('serves the page and the same document as /openapi.json, eval and OFREP routes included', async () => {
    const page = await ctx.app.inject({ method: 'GET', url: '/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const documentJson = (await ctx.app.inject({ method: 'GET', url: '/docs/json' })).json();
    expect(documentJson).toEqual((await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json());
    expect(Object.keys(documentJson.paths)).toEqual(
      expect.arrayContaining([
        '/org/subscribers/{subscriber_id}/entitlements/check',
        '/ofrep/v1/evaluate/flags',
        '/org/features',
      ]),
    );
  });

  it('is titled for the product and loads the document from /openapi.json', async () => {
    const page = await ctx.app.inject({ method: 'GET', url: '/docs' });
    expect(page.body).toContain('<title>Entitlement service API reference</title>');
    const initializer = await ctx.app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
    expect(initializer.body).toContain('"/openapi.json"');
  });

  it('renders every route in a real browser, from assets served locally', async () => {
    await ctx.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = ctx.app.server.address() as AddressInfo;
    const page = await browser.newPage();
    const outside: string[] = [];
    const documents: string[] = [];
    page.on('request', (request) => {
      if (/\/(openapi\.json|docs\/json)$/.test(request.url())) documents.push(request.url());
      if (!request.url().startsWith(`http://127.0.0.1:${port}/`) && !request.url().startsWith('data:')) {
        outside.push(request.url());
      }
    });
    await page.goto(`http://127.0.0.1:${port}/docs`);
    const check = page.locator('.opblock-summary-path', {
      hasText: '/org/subscribers/{subscriber_id}/entitlements/check',
    });
    await check.first().waitFor({ timeout: 20_000 });
    expect(await page.locator('.opblock').count()).toBeGreaterThan(40);
    expect(outside).toEqual([]);
    expect(await page.title()).toBe('Entitlement service API reference');
    expect(documents).toEqual([`http://127.0.0.1:${port}/openapi.json`]);
    await page.close();
  });
});
