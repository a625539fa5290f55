import type { UsageRecord } from '../../api/types.ts';
import { Badge } from '../../components/Badge.tsx';

/** SPEC part 3, eval metering: no warning, 80, 100, grace (evals stopped once `allowed` is false). */
export function UsageState({ record }: { record: UsageRecord }) {
  if (!record.gated)
    return <Badge tone="good">no monthly cap{record.reason ? ` (${record.reason})` : ''}</Badge>;
  if (!record.allowed) return <Badge tone="bad">blocked: evals stopped</Badge>;
  switch (record.warn) {
    case 'grace':
      return <Badge tone="bad">grace period: evals will stop</Badge>;
    case '100':
      return <Badge tone="bad">over the allotment</Badge>;
    case '80':
      return <Badge tone="warn">80% used</Badge>;
    default:
      return <Badge tone="good">within the allotment</Badge>;
  }
}
