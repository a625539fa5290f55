import { describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/app.ts';
import { testConfig } from '../../../test-support/admin-context.ts';
import { createTestDatabase } from '../../../test-support/databases.ts';

describe('an admin app closed right after it was built', () => {
  it('leaves no unhandled rejection behind (BullMQ start-up interrupted by the close)', async () => {
    const database = await createTestDatabase();
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', record);
    try {
      for (let i = 0; i < 5; i++) {
        const app = await buildAdminApp({ config: testConfig(database), logger: false });
        await app.ready();
        expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
        await app.close();
      }
      // Rejections are reported after the microtask queue drains.
      await new Promise((resolve) => setTimeout(resolve, 300));
    } finally {
      process.off('unhandledRejection', record);
      await database.drop();
    }
    expect(unhandled.map(String)).toEqual([]);
  });
});
