import { useState } from 'react';
import type { MeteredUsage } from '../../api/types.ts';
import { Badge } from '../../components/Badge.tsx';
import { formatCount, formatLimit } from '../../components/format.ts';
import { SOURCE_TONE } from './source-tone.ts';
import { UsageCorrection } from './UsageCorrection.tsx';
import { creditsLeftOf, percentText, periodText, usageMeterOf, type UsageMeter } from './usage-meter.ts';
import { UsagePeriods } from './UsagePeriods.tsx';

const FILL_TONE: Record<UsageMeter['state'], string> = {
  unlimited: 'usage-bar-good',
  within: 'usage-bar-good',
  near: 'usage-bar-warn',
  reached: 'usage-bar-bad',
  overage: 'usage-bar-good',
  credits: 'usage-bar-good',
};

function StateBadge({ meter, usage, soft }: { meter: UsageMeter; usage: MeteredUsage; soft: boolean }) {
  // No grant: limit 0 (DESIGN.md §5); "limit reached" would read as if something had been used up.
  if (usage.source === 'none' && usage.limit === 0 && usage.used === 0) return null;
  switch (meter.state) {
    case 'overage':
      return <Badge tone="warn">overage {formatCount(meter.overage)}</Badge>;
    case 'credits':
      return <Badge tone="good">on credits: {formatCount(usage.remaining ?? 0)} left</Badge>;
    case 'reached':
      return soft ? (
        <Badge tone="warn">limit reached (soft: use continues)</Badge>
      ) : (
        <Badge tone="bad">limit reached</Badge>
      );
    case 'near':
      return <Badge tone="warn">near the limit</Badge>;
    default:
      return null;
  }
}

/** One metered feature: its figures, its bar, when it resets, and its correction and past periods on demand. */
export function UsageMeterItem({
  subscriberId,
  usage,
  canCorrect,
}: {
  subscriberId: string;
  usage: MeteredUsage;
  canCorrect: boolean;
}) {
  const [correcting, setCorrecting] = useState(false);
  const [showPeriods, setShowPeriods] = useState(false);
  const meter = usageMeterOf(usage);
  const soft = usage.overage !== undefined;
  const figures =
    usage.limit === null
      ? `${formatCount(usage.used)} used, unlimited`
      : `${formatCount(usage.used)} of ${formatLimit(usage.limit)}${meter.percent === null ? '' : ` (${percentText(meter.percent)})`}${
          creditsLeftOf(usage) > 0 ? `; ${formatCount(usage.remaining ?? 0)} left with credits` : ''
        }`;
  const periodsId = `usage-periods-${usage.feature}`;

  return (
    <li className="meter" data-testid={`usage-${usage.feature}`}>
      <div className="meter-head">
        <code>{usage.feature}</code>
        <span className="meter-figures" data-testid={`usage-figures-${usage.feature}`}>
          {figures}
        </span>
        <StateBadge meter={meter} usage={usage} soft={soft} />
        {soft ? <Badge>soft limit</Badge> : null}
        <Badge tone={SOURCE_TONE[usage.source]}>{usage.source}</Badge>
      </div>
      {usage.limit === null ? null : (
        <div
          className="usage-bar meter-bar"
          role="meter"
          aria-label={`Usage of ${usage.feature}`}
          aria-valuemin={0}
          aria-valuemax={Math.max(usage.limit, usage.used)}
          aria-valuenow={usage.used}
          aria-valuetext={figures}
        >
          <div
            className={`usage-bar-fill ${FILL_TONE[meter.state]}`}
            style={{ width: `${meter.withinWidth}%` }}
          />
          {meter.overageWidth > 0 ? (
            <div
              className="usage-bar-fill usage-bar-overage"
              data-testid={`usage-overage-${usage.feature}`}
              style={{ width: `${meter.overageWidth}%` }}
            />
          ) : null}
        </div>
      )}
      <div className="meter-foot">
        <span className="cell-muted" data-testid={`usage-reset-${usage.feature}`}>
          {periodText(usage)}
        </span>
        <span className="meter-actions">
          {canCorrect && !correcting ? (
            <button type="button" className="button button-small" onClick={() => setCorrecting(true)}>
              Correct usage
            </button>
          ) : null}
          <button
            type="button"
            className="button button-small"
            aria-expanded={showPeriods}
            aria-controls={periodsId}
            onClick={() => setShowPeriods((shown) => !shown)}
          >
            {showPeriods ? 'Hide past periods' : 'Past periods'}
          </button>
        </span>
      </div>
      {correcting ? (
        <UsageCorrection subscriberId={subscriberId} usage={usage} onDone={() => setCorrecting(false)} />
      ) : null}
      {showPeriods ? (
        <UsagePeriods id={periodsId} subscriberId={subscriberId} featureKey={usage.feature} />
      ) : null}
    </li>
  );
}
