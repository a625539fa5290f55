import type { EvalGateInput, EvalGateResult } from './contract.ts';
import { periodOf } from './period.ts';
import type { EvalGateBatchReply, EvalGateReply } from './scripts.ts';

/** Evals of one organization and one UTC month that are sent to Redis together. */
export interface GateBatch {
  organizationId: string;
  period: string;
  evals: EvalGateInput[];
}

interface Waiting {
  batch: GateBatch;
  settle: { resolve: (result: EvalGateResult) => void; reject: (error: unknown) => void }[];
}

/** Bounds one script call's work, so a burst of evals never holds Redis for long. */
const MAX_EVALS_PER_CALL = 128;
const REPLY_WIDTH = 8;

/**
 * Collects the gate calls made during one event-loop turn and runs them as one script call per
 * organization and month, in arrival order. Each eval still sees exactly the state a call of its own would
 * have seen (the script applies them one after another, atomically), and still costs one round trip.
 */
export function createGateBatcher(
  run: (batch: GateBatch) => Promise<EvalGateBatchReply>,
  decode: (reply: EvalGateReply, nowMs: number) => EvalGateResult,
) {
  let waiting = new Map<string, Waiting>();
  let scheduled = false;

  async function send({ batch, settle }: Waiting): Promise<void> {
    try {
      const reply = await run(batch);
      batch.evals.forEach((evalInput, i) => {
        const slice = reply.slice(i * REPLY_WIDTH, (i + 1) * REPLY_WIDTH) as EvalGateReply;
        try {
          settle[i]!.resolve(decode(slice, evalInput.nowMs));
        } catch (error) {
          settle[i]!.reject(error);
        }
      });
    } catch (error) {
      for (const { reject } of settle) reject(error);
    }
  }

  function flush(): void {
    scheduled = false;
    const ready = waiting;
    waiting = new Map();
    for (const entry of ready.values()) void send(entry);
  }

  return {
    add(input: EvalGateInput): Promise<EvalGateResult> {
      return new Promise((resolve, reject) => {
        const period = periodOf(input.nowMs);
        const key = `${input.organizationId}\u0000${period}`;
        let entry = waiting.get(key);
        if (!entry || entry.batch.evals.length >= MAX_EVALS_PER_CALL) {
          if (entry) void send(entry);
          entry = { batch: { organizationId: input.organizationId, period, evals: [] }, settle: [] };
          waiting.set(key, entry);
        }
        entry.batch.evals.push(input);
        entry.settle.push({ resolve, reject });
        if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
  };
}
