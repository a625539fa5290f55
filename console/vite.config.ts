import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

/** `npm run dev -w @ent/console` with CONSOLE_API_TARGET=http://127.0.0.1:<gateway port> proxies the API there. */
const apiTarget = process.env.CONSOLE_API_TARGET;

// Served by admin under /console (and through the gateway); assets are referenced as /console/assets/...
export default defineConfig(({ command }) => {
  // Every build is a production build, whatever NODE_ENV the caller has: under vitest (NODE_ENV=test) or a shell
  // with NODE_ENV=development, Vite and the React plugin would emit React's development build, with `jsxDEV`
  // calls carrying the absolute source path of every element. Vite reads NODE_ENV after loading this file.
  if (command === 'build') process.env.NODE_ENV = 'production';
  return {
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
  };
});
