import type { Grant } from '../../api/types.ts';
import { formatLimit } from '../../components/format.ts';

export function GrantList({ grants }: { grants: readonly Grant[] }) {
  if (grants.length === 0) return <span className="cell-muted">no grants</span>;
  return (
    <ul className="chips">
      {grants.map((grant) => (
        <li key={grant.feature} className="chip">
          <code>{grant.feature}</code>
          {grant.kind === 'limit' ? <span className="chip-value">{formatLimit(grant.limit)}</span> : null}
        </li>
      ))}
    </ul>
  );
}
