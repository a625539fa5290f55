import type { ReactNode } from 'react';
import { ErrorNotice } from './ErrorNotice.tsx';

/** What a list says when it has no rows, in one cell as wide as the table (`columns`). */
type EmptyRow = { empty?: undefined; columns?: undefined } | { empty: ReactNode; columns: number };

/** A list as a table: the header cells, the empty-list row when `empty` is truthy, then the rows. */
export function DataTable({
  head,
  columns,
  empty,
  compact,
  testId,
  children,
}: EmptyRow & {
  /** The `<th>` cells. */
  head: ReactNode;
  compact?: boolean;
  testId?: string;
  children: ReactNode;
}) {
  return (
    <table className={compact ? 'table table-compact' : 'table'} data-testid={testId}>
      <thead>
        <tr>{head}</tr>
      </thead>
      <tbody>
        {empty ? (
          <tr>
            <td colSpan={columns} className="empty">
              {empty}
            </td>
          </tr>
        ) : null}
        {children}
      </tbody>
    </table>
  );
}

/** A row action's failure, on its own row under the row it belongs to; nothing while there is none. */
export function ErrorRow({ error, columns }: { error: unknown; columns: number }) {
  if (!error) return null;
  return (
    <tr>
      <td colSpan={columns}>
        <ErrorNotice error={error} />
      </td>
    </tr>
  );
}
