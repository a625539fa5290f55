import { converge } from './converge.ts';
import { exchange } from './http.ts';
import {
  FAULT_CREDIT_TOTAL,
  FAULT_CREDITS,
  METERED_CONSUMED,
  CREDITS_ROW_ALLOWANCE,
  type FaultOrganization,
} from './organization.ts';

/** What a credits row measured (issue 35): nothing may be spent twice. */
export interface CreditFindings {
  /** Credits held by the metered subscribers, in all. */
  granted: number;
  /** What the credits list says they gave, in all. */
  spent: number;
  /**
   * What was given twice: the consumes allowed beyond the allowance and every credit, or the final usage past them,
   * whichever is more (per subscriber, summed). A consume applied, lost with Redis and allowed again counts. Must be 0.
   */
  doubleSpent: number;
}

interface ListedCredit {
  name: string | null;
  amount: number;
  spent: number;
}

async function creditsOf(
  org: FaultOrganization,
  gatewayUrl: string,
  subscriber: string,
): Promise<ListedCredit[] | string> {
  const answer = await exchange({
    method: 'GET',
    url: `${gatewayUrl}/org/subscribers/${subscriber}/credits?feature=${METERED_CONSUMED}`,
    apiKey: org.apiKey,
  });
  const credits = (answer.body as { credits?: ListedCredit[] } | null)?.credits;
  return answer.status === 200 && credits ? credits : `${answer.status ?? answer.failure}`;
}

/**
 * Once the used figures settled (`finalUsed`, per subscriber): the allowance is spent first, so what the credits gave
 * must be exactly the usage past the allowance, within what they hold, the promotion (priority 5) before the top-up.
 * The credits list reads Redis's spent where it holds one, else Postgres's (the worker's copy): it is read until it
 * agrees or the convergence bound passes.
 */
export async function verifyCredits(
  org: FaultOrganization,
  gatewayUrls: string[],
  subscribers: string[],
  finalUsed: Record<string, { consumed: number }>,
  /** Consumes allowed beyond the allowance and the credits (the metered check's over-consumption). */
  overConsumed: number,
): Promise<{ findings: CreditFindings; failures: string[]; notes: string[] }> {
  const failures: string[] = [];
  let usedBeyond = 0;
  for (const subscriber of subscribers) {
    const used = finalUsed[subscriber]?.consumed;
    if (used !== undefined) usedBeyond += Math.max(0, used - CREDITS_ROW_ALLOWANCE - FAULT_CREDIT_TOTAL);
  }
  const doubleSpent = Math.max(usedBeyond, overConsumed);
  const listed = new Map<string, ListedCredit[]>();
  let problem = '';
  const agreed = await converge(async () => {
    problem = '';
    for (const subscriber of subscribers) {
      const credits = await creditsOf(org, gatewayUrls[0]!, subscriber);
      if (typeof credits === 'string') {
        problem = `the credits of ${subscriber} answered ${credits}`;
        return false;
      }
      listed.set(subscriber, credits);
      const used = finalUsed[subscriber]?.consumed;
      const spent = credits.reduce((sum, c) => sum + c.spent, 0);
      if (
        used !== undefined &&
        spent !== Math.min(FAULT_CREDIT_TOTAL, Math.max(0, used - CREDITS_ROW_ALLOWANCE))
      ) {
        problem = `${subscriber}: used ${used} (allowance ${CREDITS_ROW_ALLOWANCE}), but its credits say they gave ${spent}`;
        return false;
      }
    }
    return true;
  });
  if (agreed === null) failures.push(problem || 'the credits never read back');
  let spent = 0;
  for (const [subscriber, credits] of listed) {
    spent += credits.reduce((sum, c) => sum + c.spent, 0);
    for (const credit of credits)
      if (credit.spent > credit.amount)
        failures.push(`${subscriber}: credit "${credit.name}" gave ${credit.spent} of ${credit.amount}`);
    const [promotion, topUp] = FAULT_CREDITS.map((f) => credits.find((c) => c.name === f.name));
    if (promotion && topUp && topUp.spent > 0 && promotion.spent < promotion.amount)
      failures.push(
        `${subscriber}: the top-up gave ${topUp.spent} before the promotion (priority 5) was spent`,
      );
  }
  if (doubleSpent > 0)
    failures.push(`${doubleSpent} unit(s) spent beyond the allowance and the credits: double-spent`);
  const granted = FAULT_CREDIT_TOTAL * subscribers.length;
  return {
    findings: { granted, spent, doubleSpent },
    failures,
    notes: [
      `credits: ${spent} of ${granted} spent past the allowance of ${CREDITS_ROW_ALLOWANCE} each; double-spent ${doubleSpent}`,
    ],
  };
}
