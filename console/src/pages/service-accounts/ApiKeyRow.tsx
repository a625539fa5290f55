import { useMutation, useQueryClient } from '@tanstack/react-query';
import { accessApi } from '../../api/access.ts';
import type { ApiKey } from '../../api/types.ts';
import { Badge } from '../../components/Badge.tsx';
import { ConfirmButton } from '../../components/ConfirmButton.tsx';
import { ErrorRow } from '../../components/DataTable.tsx';
import { formatTime } from '../../components/format.ts';
import { apiKeysKey } from './queries.ts';

export function ApiKeyRow({ apiKey, manage }: { apiKey: ApiKey; manage: boolean }) {
  const queryClient = useQueryClient();
  const revoke = useMutation({
    mutationFn: () => accessApi.revokeApiKey(apiKey.service_account_id, apiKey.key_id),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: apiKeysKey(apiKey.service_account_id) }),
  });
  const revoked = apiKey.revoked_at !== null;
  return (
    <>
      <tr data-testid={`api-key-${apiKey.key_prefix}`} className={revoked ? 'row-archived' : undefined}>
        <td>
          <code>{apiKey.key_prefix}</code>
        </td>
        <td>{apiKey.name || <span className="cell-muted">—</span>}</td>
        <td>
          {apiKey.scopes.length === 0 ? (
            <Badge tone="warn">full access</Badge>
          ) : (
            <ul className="chips">
              {apiKey.scopes.map((scope) => (
                <li key={scope} className="chip">
                  {scope}
                </li>
              ))}
            </ul>
          )}
        </td>
        <td className="cell-nowrap">{formatTime(apiKey.created_at)}</td>
        <td data-testid="minted-by">
          {apiKey.minted_by ? (
            (apiKey.minted_by.email ?? apiKey.minted_by.member_id)
          ) : (
            <span className="cell-muted">—</span>
          )}
        </td>
        <td>
          {revoked ? (
            <Badge tone="bad">revoked {formatTime(apiKey.revoked_at)}</Badge>
          ) : (
            <Badge tone="good">active</Badge>
          )}
        </td>
        {manage ? (
          <td className="cell-actions">
            {!revoked ? (
              <ConfirmButton
                label="Revoke"
                confirmLabel="Confirm revoke"
                pending={revoke.isPending}
                onConfirm={() => revoke.mutate()}
              />
            ) : null}
          </td>
        ) : null}
      </tr>
      <ErrorRow error={revoke.error} columns={7} />
    </>
  );
}
