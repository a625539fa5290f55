import type { Grant } from '../../api/types.ts';
import { formatLimit } from '../../components/format.ts';
import { meteredTermsText } from '../../components/metered-terms.ts';

const valueOf = (grant: Grant): string | null => {
  switch (grant.kind) {
    case 'flag':
      return null;
    case 'limit':
      return formatLimit(grant.limit);
    case 'metered':
      return meteredTermsText(grant);
  }
};

export function GrantList({ grants }: { grants: readonly Grant[] }) {
  if (grants.length === 0) return <span className="cell-muted">no grants</span>;
  return (
    <ul className="chips">
      {grants.map((grant) => {
        const value = valueOf(grant);
        return (
          <li key={grant.feature} className="chip" data-testid={`grant-${grant.feature}`}>
            <code>{grant.feature}</code>
            {value === null ? null : <span className="chip-value">{value}</span>}
          </li>
        );
      })}
    </ul>
  );
}
