#!/usr/bin/env node
// Runs the TypeScript CLI directly (no build step), so `npx entctl` works right after `npm install`.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/entctl.ts');
