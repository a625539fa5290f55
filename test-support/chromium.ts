import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium (Playwright cannot download its own browser here); `.ci/run` installs it when missing. */
const CHROMIUM = '/usr/bin/chromium';

/** Flags that keep a headless Chromium off the closed network and out of first-run work. */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Browser tests fail (never skip) without the browser: call first, before starting anything. */
export function assertChromiumInstalled(): void {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium); .ci/run does`,
    );
  }
}

/** A headless Chromium. */
export function launchChromium(): Promise<Browser> {
  assertChromiumInstalled();
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}
