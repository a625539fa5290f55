/** Where the console lives under the service's origin (vite.config.ts `base` without its trailing slash). */
export const BASENAME = '/console';

/** The app path of the page the browser shows now (what the router matches), for a later `next=`. */
export const currentAppPath = (): string =>
  `${window.location.pathname.slice(BASENAME.length) || '/'}${window.location.search}`;
