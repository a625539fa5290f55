import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';

const imagesDir = fileURLToPath(new URL('../../docs/images/', import.meta.url));

/** With CONSOLE_SCREENSHOTS=1, saves the page as docs/images/console-<name>.png (committed for the docs). */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (process.env.CONSOLE_SCREENSHOTS !== '1') return;
  mkdirSync(imagesDir, { recursive: true });
  await page.screenshot({ path: `${imagesDir}console-${name}.png`, fullPage: true });
}
