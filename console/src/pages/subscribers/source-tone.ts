import type { Entitlement } from '../../api/types.ts';
import type { BadgeTone } from '../../components/Badge.tsx';

/** Where an answer's value came from, as the badge beside it shows it. */
export const SOURCE_TONE: Record<Entitlement['source'], BadgeTone> = {
  override: 'warn',
  plan: 'info',
  none: 'neutral',
};
