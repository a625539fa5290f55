import type { Kysely, Transaction } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Database } from '../src/db/database.ts';
import { transact } from '../src/outbox/record.ts';

/** A database whose transactions run `work` at once, counting how many were opened. */
function fakeDb() {
  const opened = { count: 0 };
  const trx = { isTransaction: true } as unknown as Transaction<Database>;
  const db = {
    isTransaction: false,
    transaction: () => ({
      execute: <T>(work: (t: Transaction<Database>) => Promise<T>) => {
        opened.count += 1;
        return work(trx);
      },
    }),
  } as unknown as Kysely<Database>;
  return { db, trx, opened };
}

const pgError = (code: string) => Object.assign(new Error(code), { code });

describe('transact', () => {
  it('runs a deadlock victim or a serialization failure again, in a new transaction', async () => {
    for (const code of ['40P01', '40001']) {
      const { db, opened } = fakeDb();
      let runs = 0;
      const result = await transact(db, async () => {
        runs += 1;
        if (runs === 1) throw pgError(code);
        return 'done';
      });
      expect(result).toBe('done');
      expect(opened.count).toBe(2);
    }
  });

  it('gives up after three attempts, and never retries another error', async () => {
    const always = fakeDb();
    await expect(transact(always.db, () => Promise.reject(pgError('40P01')))).rejects.toMatchObject({
      code: '40P01',
    });
    expect(always.opened.count).toBe(3);
    const unique = fakeDb();
    await expect(transact(unique.db, () => Promise.reject(pgError('23505')))).rejects.toMatchObject({
      code: '23505',
    });
    expect(unique.opened.count).toBe(1);
  });

  it("inside the caller's transaction, runs once and leaves a retry to whoever opened it", async () => {
    const { trx } = fakeDb();
    let runs = 0;
    const failing = transact(trx as unknown as Kysely<Database>, async () => {
      runs += 1;
      throw pgError('40P01');
    });
    await expect(failing).rejects.toMatchObject({ code: '40P01' });
    expect(runs).toBe(1);
  });
});
