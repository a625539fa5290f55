import { ensureTemplate } from './databases.ts';

/** Runs once per `vitest run`: the migrated template every test file clones its database from. */
export default async function setup(): Promise<void> {
  await ensureTemplate();
}
