import { useQuery } from '@tanstack/react-query';
import { usageApi } from '../../api/usage.ts';
import { formatCount, formatLimit, formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { PageHeader } from '../../components/PageHeader.tsx';
import { PastMonths } from './PastMonths.tsx';
import { UsageChart } from './UsageChart.tsx';
import { UsageState } from './UsageState.tsx';

/** The current month and a year before it. */
const HISTORY_MONTHS = 13;

export function UsagePage() {
  const usage = useQuery({
    queryKey: ['usage', 'current'],
    queryFn: usageApi.current,
    refetchInterval: 30_000,
  });
  const history = useQuery({
    queryKey: ['usage', 'history', HISTORY_MONTHS],
    queryFn: () => usageApi.history(HISTORY_MONTHS),
    refetchInterval: 30_000,
  });
  const record = usage.data;
  const [thisMonth, ...pastMonths] = history.data?.months ?? [];
  return (
    <>
      <PageHeader
        title="Usage"
        description="Your organization's own evals this UTC month: every 2xx answer of an eval route counts once."
      />
      <QueryState isPending={usage.isPending} error={usage.error} what="usage" />
      {record ? (
        <>
          <section className="panel usage-summary" data-testid="usage-summary">
            <div className="stat">
              <span className="stat-label">Period</span>
              <span className="stat-value">{record.period}</span>
            </div>
            <div className="stat">
              <span className="stat-label">Evals counted</span>
              <span className="stat-value" data-testid="usage-count">
                {formatCount(record.count)}
              </span>
            </div>
            <div className="stat">
              <span className="stat-label">Included</span>
              <span className="stat-value">{record.gated ? formatLimit(record.limit) : 'no cap'}</span>
            </div>
            <div className="stat">
              <span className="stat-label">Allotment</span>
              <span className="stat-value">{record.plan ?? '—'}</span>
            </div>
            <div className="stat">
              <span className="stat-label">State</span>
              <span className="stat-value">
                <UsageState record={record} />
              </span>
            </div>
          </section>
          <section className="panel" data-testid="usage-chart">
            <h2>This month</h2>
            <QueryState isPending={history.isPending} error={history.error} what="the daily counts" />
            {thisMonth ? <UsageChart month={thisMonth} limit={record.gated ? record.limit : null} /> : null}
            <dl className="facts">
              <dt>Blocking</dt>
              <dd>
                {record.blocking
                  ? 'yes: evals stop 7 days after first reaching 100%'
                  : 'no: evals keep answering past the limit'}
              </dd>
              <dt>First reached 100%</dt>
              <dd>{formatTime(record.first_over_at)}</dd>
              <dt>Evals stop at</dt>
              <dd>{formatTime(record.blocked_at)}</dd>
            </dl>
          </section>
          <section className="panel" data-testid="usage-past-months">
            <h2>Past months</h2>
            {history.data ? <PastMonths months={pastMonths} /> : null}
          </section>
        </>
      ) : null}
    </>
  );
}
