import { isMeteredMember, parseCreditDirtyMember } from '@ent/common/redis/keys';

/**
 * Splits a drain's candidates: balance members are read as balances, credit members (`credit|<subscriber>|
 * <feature>`) name a credit-spent hash to read with them. A member that can be read both ways (subscriber `credit`,
 * a feature key of digits) goes to both.
 */
export function splitDirtyMembers(members: readonly string[]): { balances: string[]; others: string[] } {
  const balances: string[] = [];
  const credits: string[] = [];
  for (const member of members) {
    const credit = parseCreditDirtyMember(member) !== undefined;
    if (credit) credits.push(member);
    if (!credit || isMeteredMember(member)) balances.push(member);
  }
  return { balances, others: credits };
}
