import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { EvalGateResult } from '../../gateway/src/metering/contract.ts';
import { createGateBatcher, type GateBatch } from '../../gateway/src/metering/gate-batcher.ts';
import type { EvalGateBatchReply } from '../../gateway/src/metering/scripts.ts';

const NOW = Date.UTC(2026, 10, 22, 12);

/** A fake script: records each call's subscribers and answers when the test releases it. */
function scriptedRedis(maxHoldMs = 60_000, turnsToWait = 0) {
  const calls: { subscribers: string[]; release: () => void; fail: (error: Error) => void }[] = [];
  const run = (batch: GateBatch) =>
    new Promise<EvalGateBatchReply>((resolve, reject) => {
      const reply = [0, -1, 0, 1, 1, 0, 0, 1, ...batch.evals.map((e) => 4 * (Number(e.subscriberId.slice(1)) + 1))];
      calls.push({
        subscribers: batch.evals.map((e) => `${batch.organizationId}/${e.subscriberId}`),
        release: () => resolve(reply as EvalGateBatchReply),
        fail: reject,
      });
    });
  const decode = (reply: EvalGateBatchReply, evals: readonly unknown[]): EvalGateResult[] =>
    evals.map((_, i) => ({
      outcome: 'counted',
      versions: { catalog: reply[3]!, subscriber: reply[8 + i]! / 4 - 1, auth: reply[4]!, subscriberStamp: 0 },
      usage: null,
    }));
  return { calls, batcher: createGateBatcher(run, decode, { maxHoldMs, turnsToWait, smallBatch: 4 }) };
}

const evalOf = (organizationId: string, n: number, nowMs = NOW) => ({ organizationId, subscriberId: `s${n}`, nowMs });

describe('gate batcher', () => {
  it('lets a small batch wait a few event-loop turns for more evals, then sends it; a full one goes at once', async () => {
    const { calls, batcher } = scriptedRedis(60_000, 2);
    const answers = [batcher.add(evalOf('a', 1))];
    await nextTurn();
    answers.push(batcher.add(evalOf('a', 2)));
    expect(calls).toHaveLength(0);
    await nextTurn();
    await nextTurn();
    await nextTurn();
    expect(calls.map((c) => c.subscribers)).toEqual([['a/s1', 'a/s2']]);
    calls[0]!.release();
    await Promise.all(answers);
    // Four evals (smallBatch here) are not small: sent at the end of their turn.
    const full = [1, 2, 3, 4].map((n) => batcher.add(evalOf('b', n)));
    await nextTurn();
    expect(calls.map((c) => c.subscribers)).toEqual([['a/s1', 'a/s2'], ['b/s1', 'b/s2', 'b/s3', 'b/s4']]);
    calls[1]!.release();
    await Promise.all(full);
  });

  it('sends the evals of one turn as one call per organization, and answers each with its own slice', async () => {
    const { calls, batcher } = scriptedRedis();
    const answers = [batcher.add(evalOf('a', 1)), batcher.add(evalOf('a', 2)), batcher.add(evalOf('b', 3))];
    await nextTurn();
    expect(calls.map((c) => c.subscribers)).toEqual([['a/s1', 'a/s2'], ['b/s3']]);
    for (const call of calls) call.release();
    const results = await Promise.all(answers);
    expect(results.map((r) => r.versions.subscriber)).toEqual([1, 2, 3]);
  });

  it('keeps months apart: evals either side of a month boundary never share a call', async () => {
    const { calls, batcher } = scriptedRedis();
    void batcher.add(evalOf('a', 1, Date.UTC(2026, 9, 31, 23, 59, 59, 999)));
    void batcher.add(evalOf('a', 2, Date.UTC(2026, 10, 1)));
    await nextTurn();
    expect(calls.map((c) => c.subscribers)).toEqual([['a/s1'], ['a/s2']]);
  });

  it('holds evals that arrive while their lane has a call in flight, and sends them together when it returns', async () => {
    const { calls, batcher } = scriptedRedis();
    const first = batcher.add(evalOf('a', 1));
    await nextTurn();
    const held = [batcher.add(evalOf('a', 2))];
    await nextTurn();
    held.push(batcher.add(evalOf('a', 3)));
    await nextTurn();
    expect(calls).toHaveLength(1);
    calls[0]!.release();
    await first;
    await nextTurn();
    expect(calls.map((c) => c.subscribers)).toEqual([['a/s1'], ['a/s2', 'a/s3']]);
    calls[1]!.release();
    expect((await Promise.all(held)).map((r) => r.versions.subscriber)).toEqual([2, 3]);
  });

  it('does not hold a lane behind a call that is slow to return (a stalled Redis)', async () => {
    const { calls, batcher } = scriptedRedis(5);
    void batcher.add(evalOf('a', 1));
    await nextTurn();
    const held = batcher.add(evalOf('a', 2));
    await sleep(50);
    expect(calls.map((c) => c.subscribers)).toEqual([['a/s1'], ['a/s2']]);
    calls[1]!.release();
    expect((await held).versions.subscriber).toBe(2);
  });

  it('never holds one organization behind another', async () => {
    const { calls, batcher } = scriptedRedis();
    void batcher.add(evalOf('a', 1));
    await nextTurn();
    void batcher.add(evalOf('b', 2));
    await nextTurn();
    expect(calls.map((c) => c.subscribers)).toEqual([['a/s1'], ['b/s2']]);
  });

  it('caps a call at 128 evals, in arrival order', async () => {
    const { calls, batcher } = scriptedRedis();
    const answers = Array.from({ length: 300 }, (_, i) => batcher.add(evalOf('a', i)));
    await nextTurn();
    // Full batches go at once, even beside a call in flight; the rest waits for a call to return.
    expect(calls.map((c) => c.subscribers.length)).toEqual([128, 128]);
    calls[0]!.release();
    calls[1]!.release();
    await answers[255];
    await nextTurn();
    expect(calls.map((c) => c.subscribers.length)).toEqual([128, 128, 44]);
    expect(calls.flatMap((c) => c.subscribers)).toEqual(Array.from({ length: 300 }, (_, i) => `a/s${i}`));
    calls[2]!.release();
    expect((await Promise.all(answers)).map((r) => r.versions.subscriber)).toEqual(Array.from({ length: 300 }, (_, i) => i));
  });

  it('fails every eval of a failed call, and the lane goes on with the next batch', async () => {
    const { calls, batcher } = scriptedRedis();
    const failing = [batcher.add(evalOf('a', 1)), batcher.add(evalOf('a', 2))];
    await nextTurn();
    const next = batcher.add(evalOf('a', 3));
    calls[0]!.fail(new Error('connection lost'));
    for (const answer of failing) await expect(answer).rejects.toThrow('connection lost');
    await nextTurn();
    expect(calls.map((c) => c.subscribers)).toEqual([['a/s1', 'a/s2'], ['a/s3']]);
    calls[1]!.release();
    expect((await next).versions.subscriber).toBe(3);
  });
});
