import type { UsageMonth } from '../../api/types.ts';
import { formatCount, formatLimit } from '../../components/format.ts';

const percentOf = (month: UsageMonth): number | null =>
  month.limit === null || month.limit === 0 ? null : (month.count / month.limit) * 100;

const toneOf = (percent: number): string =>
  percent >= 100 ? 'usage-bar-bad' : percent >= 80 ? 'usage-bar-warn' : 'usage-bar-good';

/**
 * Earlier months as the service recorded them (GET /org/usage/history): the month's count against the
 * allotment it last had, with a bar of the share used. Months without a recorded sample are not listed.
 */
export function PastMonths({ months }: { months: readonly UsageMonth[] }) {
  if (months.length === 0) {
    return (
      <p className="panel-note" data-testid="usage-history-note">
        No earlier month recorded yet: the service keeps each day&apos;s count from the day it first counts an
        eval.
      </p>
    );
  }
  return (
    <table className="table table-compact" data-testid="usage-history">
      <thead>
        <tr>
          <th>Month</th>
          <th className="cell-number">Evals</th>
          <th className="cell-number">Allotment</th>
          <th className="cell-number">Used</th>
          <th aria-label="Share of the allotment" />
        </tr>
      </thead>
      <tbody>
        {months.map((month) => {
          const percent = percentOf(month);
          return (
            <tr key={month.period} data-testid={`usage-month-${month.period}`}>
              <td>{month.period}</td>
              <td className="cell-number">{formatCount(month.count)}</td>
              <td className="cell-number">{formatLimit(month.limit)}</td>
              <td className="cell-number">
                {percent === null ? '—' : `${percent.toFixed(percent < 10 ? 1 : 0)}%`}
              </td>
              <td className="usage-bar-cell">
                {percent === null ? null : (
                  <div className="usage-bar">
                    <div
                      className={`usage-bar-fill ${toneOf(percent)}`}
                      style={{ width: `${Math.min(percent, 100)}%` }}
                    />
                  </div>
                )}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
