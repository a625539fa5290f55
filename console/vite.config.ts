import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

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
});
