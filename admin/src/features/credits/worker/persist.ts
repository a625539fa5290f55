import { isMeteredMember, parseCreditDirtyMember } from '@ent/common/redis/keys';

/**
 * Splits a drain's candidates: balance members are read as balances, credit members (`credit|<subscriber>|
 * <feature>`) name a credit-spent hash to read with them, and a balance's credit member (`credit|<balance member>`)
 * names both. A member that can be read both ways (subscriber `credit`, a feature key of digits) goes to both. Each
 * balance is listed once, however many members named it.
 */
export function splitDirtyMembers(members: readonly string[]): { balances: string[]; others: string[] } {
  const balances = new Set<string>();
  const credits: string[] = [];
  for (const member of members) {
    const credit = parseCreditDirtyMember(member);
    if (credit) credits.push(member);
    if (credit?.balanceMember !== undefined) balances.add(credit.balanceMember);
    else if (!credit || isMeteredMember(member)) balances.add(member);
  }
  return { balances: [...balances], others: credits };
}
