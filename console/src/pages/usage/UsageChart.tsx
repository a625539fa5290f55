import {
  Bar,
  BarChart,
  CartesianGrid,
  LabelList,
  ReferenceLine,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from 'recharts';
import type { UsageRecord } from '../../api/types.ts';
import { formatCount } from '../../components/format.ts';

const compact = new Intl.NumberFormat(undefined, { notation: 'compact' });

/**
 * The month's count against its allotment, with lines at 80% and 100%. The API gives the month's total only
 * (no daily series), so the chart has one bar: this month so far.
 */
export function UsageChart({ record }: { record: UsageRecord }) {
  const limit = record.gated ? record.limit : null;
  const top = Math.max(record.count, limit ?? 0) * 1.1 || 10;
  const data = [{ period: record.period, evals: record.count }];
  return (
    <div className="chart" role="img" aria-label={`Evals in ${record.period}: ${formatCount(record.count)}`}>
      <ResponsiveContainer width="100%" height={260}>
        <BarChart data={data} layout="vertical" margin={{ top: 24, right: 48, bottom: 8, left: 8 }}>
          <CartesianGrid strokeDasharray="3 3" horizontal={false} />
          <XAxis type="number" domain={[0, top]} tickFormatter={(value: number) => compact.format(value)} />
          <YAxis type="category" dataKey="period" width={72} />
          <Tooltip formatter={(value) => formatCount(Number(value))} />
          <Bar
            dataKey="evals"
            name="Evals counted"
            fill="#2563eb"
            barSize={48}
            minPointSize={3}
            isAnimationActive={false}
          >
            <LabelList
              dataKey="evals"
              position="right"
              formatter={(value) => formatCount(Number(value))}
              fill="#1c2430"
            />
          </Bar>
          {limit !== null ? (
            <ReferenceLine
              x={limit * 0.8}
              stroke="#d97706"
              strokeDasharray="4 4"
              label={{ value: '80%', position: 'top', fill: '#b45309' }}
            />
          ) : null}
          {limit !== null ? (
            <ReferenceLine
              x={limit}
              stroke="#dc2626"
              label={{ value: `100% (${compact.format(limit)})`, position: 'top', fill: '#b91c1c' }}
            />
          ) : null}
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}
