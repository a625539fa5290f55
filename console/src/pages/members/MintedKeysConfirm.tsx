import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { accessApi } from '../../api/access.ts';
import type { Member } from '../../api/types.ts';
import { formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';

export const mintedKeysKey = (memberId: string) => ['members', memberId, 'minted-keys'] as const;

/**
 * The confirmation of a removal or a demotion, on its own row under the member: the live API keys the member
 * minted (what they could have copied), revoked by the write unless the admin unticks the box, for keys a
 * production integration still needs.
 */
export function MintedKeysConfirm({
  member,
  action,
  columns,
  pending,
  onConfirm,
  onCancel,
}: {
  member: Member;
  /** What the confirm button says: "Remove member", "Change role to viewer". */
  action: string;
  columns: number;
  pending: boolean;
  onConfirm: (revokeMintedKeys: boolean) => void;
  onCancel: () => void;
}) {
  const keys = useQuery({
    queryKey: mintedKeysKey(member.member_id),
    queryFn: () => accessApi.mintedKeys(member.member_id),
  });
  const [revoke, setRevoke] = useState(true);
  const label = member.email ?? member.name ?? member.member_id;
  const list = keys.data?.api_keys ?? [];
  return (
    <tr className="row-details" data-testid={`confirm-${member.email ?? member.member_id}`}>
      <td colSpan={columns}>
        <QueryState isPending={keys.isPending} error={keys.error} what="the keys this member minted" />
        {keys.data ? (
          <div className="form">
            {list.length === 0 ? (
              <p data-testid="minted-keys-none">{label} minted no API key that is still live.</p>
            ) : (
              <>
                <p>
                  {label} minted {list.length}
                  {keys.data.has_more ? '+' : ''} live API {list.length === 1 ? 'key' : 'keys'}; they could
                  have copied {list.length === 1 ? 'it' : 'them'}:
                </p>
                <ul data-testid="minted-keys">
                  {list.map((key) => (
                    <li key={key.key_id}>
                      <code>{key.key_prefix}</code> {key.name ? `“${key.name}” ` : ''}
                      <span className="cell-muted">
                        on {key.service_account_id},{' '}
                        {key.scopes.length ? key.scopes.join(', ') : 'full access'}, created{' '}
                        {formatTime(key.created_at)}
                      </span>
                    </li>
                  ))}
                </ul>
                <label className="checkbox">
                  <input type="checkbox" checked={revoke} onChange={(e) => setRevoke(e.target.checked)} />{' '}
                  Revoke
                  {list.length === 1 ? ' this key' : ' these keys'} (untick only for keys a production
                  integration still needs; the audit log records the choice)
                </label>
              </>
            )}
            <span className="confirm">
              <button
                type="button"
                className="button button-small button-danger"
                disabled={pending}
                onClick={() => onConfirm(revoke)}
              >
                {pending ? 'Working…' : `Confirm: ${action}`}
              </button>
              <button type="button" className="button button-small" disabled={pending} onClick={onCancel}>
                Cancel
              </button>
            </span>
          </div>
        ) : null}
      </td>
    </tr>
  );
}
