import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

/** `npm run dev -w @ent/console` with CONSOLE_API_TARGET=http://127.0.0.1:<gateway port> proxies the API there. */
const apiTarget = process.env.CONSOLE_API_TARGET;

// Served by admin under /console (and through the gateway); assets are referenced as /console/assets/...
export default defineConfig({
  base: '/console/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // The page's Content-Security-Policy allows no inline script: keep every module in a file.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 1500,
  },
  server: apiTarget ? { proxy: { '/org': apiTarget, '/console/api': apiTarget } } : {},
});
