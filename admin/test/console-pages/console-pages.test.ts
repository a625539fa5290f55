import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminContext, type AdminTestContext } from '../../../test-support/admin-context.ts';

/** A build of the console of our own (console/ belongs to its own workspace), and one that was never built. */
const dist = mkdtempSync(join(tmpdir(), 'console-dist-'));
const unbuilt = mkdtempSync(join(tmpdir(), 'console-unbuilt-'));
const INDEX =
  '<!doctype html><title>Console</title><script type="module" src="/console/assets/app-abc123.js"></script>';
let ctx: AdminTestContext;
let withoutBuild: AdminTestContext;

beforeAll(async () => {
  mkdirSync(join(dist, 'assets'));
  writeFileSync(join(dist, 'index.html'), INDEX);
  writeFileSync(join(dist, 'assets', 'app-abc123.js'), 'console.log("app")');
  writeFileSync(join(dist, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  writeFileSync(join(dist, '.env'), 'SECRET=1');
  writeFileSync(join(tmpdir(), 'outside-console.txt'), 'outside');
  ctx = await createAdminContext({ consoleDistDir: dist });
  withoutBuild = await createAdminContext({ consoleDistDir: unbuilt });
});
afterAll(async () => {
  await ctx?.close();
  await withoutBuild?.close();
  rmSync(dist, { recursive: true, force: true });
  rmSync(unbuilt, { recursive: true, force: true });
});

const get = (url: string, app = ctx) => app.app.inject({ method: 'GET', url });

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

describe('the console at /console', () => {
  it.each([
    '/console',
    '/console/',
    '/console/join/some-invite-token',
    '/console/plans/pro',
  ])('%s answers index.html, revalidated on every load, with the security headers', async (url) => {
    const res = await get(url);
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe(INDEX);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers).toMatchObject(SECURITY_HEADERS);
  });

  it("answers a build's file that is not there 404, never the page as a script", async () => {
    const res = await get('/console/assets/missing.js');
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });

  it('serves hashed assets cached for a year, other files revalidated', async () => {
    const asset = await get('/console/assets/app-abc123.js');
    expect(asset.statusCode).toBe(200);
    expect(asset.body).toBe('console.log("app")');
    expect(asset.headers['content-type']).toMatch(/javascript/);
    expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const icon = await get('/console/favicon.svg');
    expect(icon.statusCode).toBe(200);
    expect(icon.headers['cache-control']).toBe('no-cache');
  });

  it('never serves dotfiles or anything outside the build', async () => {
    for (const url of [
      '/console/.env',
      '/console/..%2Foutside-console.txt',
      '/console/%2e%2e/outside-console.txt',
    ]) {
      const res = await get(url);
      expect(res.body, url).not.toContain('SECRET');
      expect(res.body, url).not.toBe('outside');
    }
  });

  it('leaves /console/api/* to the API: an unknown one is a JSON 404', async () => {
    for (const url of ['/console/api', '/console/api/nope']) {
      const res = await get(url);
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('NOT_FOUND');
    }
    expect((await get('/console/api/session')).statusCode).toBe(401);
  });

  it('documents the console API in /openapi.json, and neither the pages nor the internal route', async () => {
    const paths = Object.keys((await get('/openapi.json')).json().paths);
    expect(paths).toEqual(
      expect.arrayContaining([
        '/console/api/sign-up',
        '/console/api/sign-in',
        '/console/api/sign-out',
        '/console/api/session',
        '/console/api/password',
        '/console/api/invites/{token}',
        '/console/api/invites/{token}/accept',
      ]),
    );
    expect(
      paths.filter(
        (path) => path === '/console' || path.startsWith('/console/*') || path.startsWith('/internal'),
      ),
    ).toEqual([]);
  });

  it('answers 503 naming the build command when the console was never built', async () => {
    const res = await get('/console/join/x', withoutBuild);
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
    expect(res.json().error.message).toContain('npm run console:build');
  });
});
