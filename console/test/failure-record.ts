import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page, Request, Response } from 'playwright-core';

/** Where a failed case leaves what it saw (gitignored): one folder per failed case. */
const outputDir = fileURLToPath(new URL('../test-output/', import.meta.url));

const pathAndQuery = (url: string) => {
  const { pathname, search } = new URL(url);
  return `${pathname}${search}`;
};

/** One answer (or failed request) to the console's API calls, as the page got it. */
interface Exchange {
  /** Milliseconds since the recorder started, when the answer came (or the request failed). */
  at: number;
  /** Which page: the recorder's name for its context. */
  page: string;
  method: string;
  url: string;
  /** null: the request failed without an answer (`failure` says why). */
  status: number | null;
  /** Milliseconds between the request and its answer. */
  ms: number;
  requestBody?: string;
  /** The answer's body (cut at 2,000 characters). */
  body?: string;
  failure?: string;
  requestId?: string;
}

/** Answers kept per case (the last ones): enough for a case, bounded for a long one. */
const KEPT = 400;
const BODY_CHARS = 2000;

const apiPath = (url: string): boolean => {
  const { pathname } = new URL(url);
  return pathname.startsWith('/org/') || pathname === '/org' || pathname.startsWith('/console/api/');
};

/**
 * Records every API answer the pages of the tracked contexts get (status, timing, bodies), so that a failed case
 * can tell which of its stories happened: a write answered with an error, a read that never came again, a read that
 * came and answered the old figures. On failure `write` saves the record, a screenshot and the visible text of each
 * page, the error notices on them and the stack's process output into console/test-output/<case>/.
 */
export class FailureRecorder {
  private readonly exchanges: Exchange[] = [];
  private readonly pages: { name: string; page: Page }[] = [];
  private readonly started = Date.now();

  track(context: BrowserContext, name: string): void {
    const sent = new WeakMap<Request, number>();
    context.on('request', (request) => {
      if (apiPath(request.url())) sent.set(request, Date.now());
    });
    context.on('response', (response) => void this.answered(name, response, sent.get(response.request())));
    context.on('requestfailed', (request) => {
      if (!apiPath(request.url())) return;
      this.keep({
        ...this.headOf(name, request, sent.get(request)),
        status: null,
        failure: request.failure()?.errorText ?? 'failed',
      });
    });
    context.on('page', (page) => this.pages.push({ name, page }));
    for (const page of context.pages()) this.pages.push({ name, page });
  }

  /** A case starts: what it writes on failure begins here. */
  startCase(): void {
    this.exchanges.length = 0;
  }

  private async answered(name: string, response: Response, sentAt: number | undefined): Promise<void> {
    const request = response.request();
    if (!apiPath(request.url())) return;
    const head = this.headOf(name, request, sentAt);
    let body: string | undefined;
    try {
      body = (await response.text()).slice(0, BODY_CHARS);
    } catch {
      body = undefined; // A page that navigated away took its body with it.
    }
    const requestBody = request.postData();
    this.keep({
      ...head,
      status: response.status(),
      ...(requestBody ? { requestBody: requestBody.slice(0, BODY_CHARS) } : {}),
      ...(body !== undefined ? { body } : {}),
      ...(response.headers()['x-request-id'] ? { requestId: response.headers()['x-request-id'] } : {}),
    });
  }

  /** What every exchange records of its request, as of now (the answer, or the failure, came). */
  private headOf(page: string, request: Request, sentAt: number | undefined) {
    const now = Date.now();
    return {
      at: now - this.started,
      page,
      method: request.method(),
      url: request.url(),
      ms: now - (sentAt ?? now),
    };
  }

  private keep(exchange: Exchange): void {
    this.exchanges.push(exchange);
    if (this.exchanges.length > KEPT) this.exchanges.splice(0, this.exchanges.length - KEPT);
  }

  /**
   * Saves what the failed case saw; returns the folder and a summary for the test output: every write and every
   * answer that was not a 2xx, with its status and body, and the last answer of each route read.
   */
  async write(caseName: string, extra: { stackOutput?: string } = {}): Promise<string> {
    const dir = join(outputDir, caseName.replace(/[^\w-]+/g, '-').slice(0, 80));
    mkdirSync(dir, { recursive: true });
    const exchanges = [...this.exchanges];
    writeFileSync(join(dir, 'network.json'), JSON.stringify(exchanges, null, 2));
    const notices: string[] = [];
    for (const [i, { name, page }] of this.pages.entries()) {
      if (page.isClosed()) continue;
      const file = `${i}-${name}`;
      await page
        .screenshot({ path: join(dir, `${file}.png`), fullPage: true, timeout: 5000 })
        .catch(() => {});
      const text = await page
        .evaluate<string>('document.body ? document.body.innerText : ""')
        .catch((error: Error) => `(no text: ${error.message})`);
      writeFileSync(join(dir, `${file}.txt`), `${page.url()}\n\n${text}`);
      const shown = await page
        .locator('[data-testid="error-notice"]')
        .allInnerTexts()
        .catch(() => []);
      for (const notice of shown) notices.push(`${name} ${page.url()}: ${notice.replace(/\s+/g, ' ')}`);
    }
    if (extra.stackOutput !== undefined) writeFileSync(join(dir, 'stack.log'), extra.stackOutput);
    const line = (e: Exchange) =>
      `  +${e.at}ms ${e.page} ${e.method} ${pathAndQuery(e.url)} -> ${
        e.status ?? `failed (${e.failure})`
      } in ${e.ms}ms${e.status !== null && (e.status >= 300 || e.method !== 'GET') ? ` ${e.body ?? ''}` : ''}`;
    const writes = exchanges.filter((e) => e.method !== 'GET' || e.status === null || e.status >= 300);
    const lastReads = new Map<string, Exchange>();
    for (const e of exchanges) if (e.method === 'GET') lastReads.set(new URL(e.url).pathname, e);
    const summary = [
      `failed case "${caseName}": record in ${dir}`,
      'writes and answers that were not a 2xx:',
      ...writes.map(line),
      'the last answer of each route read:',
      ...[...lastReads.values()].map((e) => `${line(e)} ${(e.body ?? '').slice(0, 400)}`),
      `error notices shown: ${notices.length === 0 ? 'none' : ''}`,
      ...notices.map((notice) => `  ${notice}`),
    ].join('\n');
    writeFileSync(join(dir, 'summary.txt'), summary);
    return summary;
  }
}
