import {
  Area,
  AreaChart,
  CartesianGrid,
  ReferenceLine,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from 'recharts';
import type { UsageMonth } from '../../api/types.ts';
import { formatCount } from '../../components/format.ts';
import { usageScale, type ShareLine } from './chart-scale.ts';

const compact = new Intl.NumberFormat(undefined, { notation: 'compact' });

interface Point {
  /** Day of the month; 0 is the month's start, when every count is zero. */
  day: number;
  /** The month's cumulative count at the end of that day; null where no sample was taken (yet). */
  evals: number | null;
}

const daysIn = (period: string): number => {
  const [year, month] = period.split('-').map(Number);
  return new Date(Date.UTC(year!, month!, 0)).getUTCDate();
};

/**
 * One point per day of the month: the start at zero, each sampled day's count, nothing for days not sampled
 * (the line joins its neighbours) or still to come.
 */
function pointsOf(month: UsageMonth): Point[] {
  const byDay = new Map(month.days.map((day) => [Number(day.date.slice(8, 10)), day.count]));
  return Array.from({ length: daysIn(month.period) + 1 }, (_, day) => ({
    day,
    evals: day === 0 ? 0 : (byDay.get(day) ?? null),
  }));
}

const LINE_STYLE: Record<ShareLine['percent'], { stroke: string; fill: string; dash?: string }> = {
  80: { stroke: '#d97706', fill: '#b45309', dash: '4 4' },
  100: { stroke: '#dc2626', fill: '#b91c1c' },
};

const lineLabel = (line: ShareLine): string =>
  line.percent === 100 ? `100% (${compact.format(line.value)})` : `${line.percent}%`;

/**
 * This month's evals per day, cumulative (GET /org/usage/history), scaled to the count, with the lines at 80% and
 * 100% of the allotment where the axis reaches them (chart-scale.ts); `limit` is the allotment that applies now
 * (null: no cap, no lines).
 */
export function UsageChart({ month, limit }: { month: UsageMonth; limit: number | null }) {
  const points = pointsOf(month);
  const lastDay = points.length - 1;
  const { top, ticks, shown, above } = usageScale(month.count, limit);
  const monthName = new Date(`${month.period}-01T00:00:00Z`).toLocaleString(undefined, {
    month: 'short',
    timeZone: 'UTC',
  });
  return (
    <>
      <div
        className="chart"
        role="img"
        aria-label={`Evals in ${month.period} so far: ${formatCount(month.count)}, day by day`}
      >
        <ResponsiveContainer width="100%" height={280}>
          <AreaChart data={points} margin={{ top: 24, right: 24, bottom: 8, left: 8 }}>
            <CartesianGrid strokeDasharray="3 3" vertical={false} />
            <XAxis
              type="number"
              dataKey="day"
              domain={[0, lastDay]}
              ticks={[1, 5, 10, 15, 20, 25, lastDay]}
              tickFormatter={(day: number) => `${monthName} ${day}`}
            />
            <YAxis
              domain={[0, top]}
              ticks={ticks}
              width={64}
              tickFormatter={(value: number) => compact.format(value)}
              allowDecimals={false}
              allowDataOverflow={false}
            />
            <Tooltip
              labelFormatter={(day) =>
                Number(day) === 0 ? `${monthName} 1, 00:00 UTC` : `${monthName} ${day} (UTC)`
              }
              formatter={(value) => [formatCount(Number(value)), 'Evals this month']}
            />
            <Area
              type="linear"
              dataKey="evals"
              name="Evals this month"
              stroke="#2563eb"
              strokeWidth={2}
              fill="#2563eb"
              fillOpacity={0.12}
              connectNulls
              dot={{ r: 2.5, fill: '#2563eb' }}
              isAnimationActive={false}
            />
            {shown.map((line) => (
              <ReferenceLine
                key={line.percent}
                y={line.value}
                stroke={LINE_STYLE[line.percent].stroke}
                {...(LINE_STYLE[line.percent].dash ? { strokeDasharray: LINE_STYLE[line.percent].dash } : {})}
                label={{
                  value: lineLabel(line),
                  position: 'insideTopLeft',
                  fill: LINE_STYLE[line.percent].fill,
                }}
              />
            ))}
          </AreaChart>
        </ResponsiveContainer>
      </div>
      {above.length > 0 ? (
        <p className="panel-note" data-testid="usage-chart-note">
          The {above.map((line) => `${line.percent}%`).join(' and ')} {above.length > 1 ? 'lines' : 'line'} (
          {above.map((line) => formatCount(line.value)).join(' and ')} evals){' '}
          {above.length > 1 ? 'lie' : 'lies'} above this chart, which is scaled to this month&apos;s count.
        </p>
      ) : null}
    </>
  );
}
