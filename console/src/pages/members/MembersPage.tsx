import { useQuery } from '@tanstack/react-query';
import { accessApi } from '../../api/access.ts';
import { usePermissions, useSession } from '../../auth/session.ts';
import { DataTable } from '../../components/DataTable.tsx';
import { QueryState } from '../../components/Loading.tsx';
import { PageHeader } from '../../components/PageHeader.tsx';
import { InvitesPanel } from './InvitesPanel.tsx';
import { MemberRow } from './MemberRow.tsx';
import { MEMBERS_KEY } from './queries.ts';

export function MembersPage() {
  const can = usePermissions();
  const session = useSession();
  const members = useQuery({ queryKey: MEMBERS_KEY, queryFn: () => accessApi.members({ kind: 'user' }) });
  return (
    <>
      <PageHeader
        title="Members"
        description="People who sign in to this console. Roles: admin (everything), developer (no audit log, no member changes), viewer (reads and checks)."
      />
      <QueryState isPending={members.isPending} error={members.error} what="members" />
      {members.data ? (
        <DataTable
          testId="members-table"
          head={
            <>
              <th>Email</th>
              <th>Name</th>
              <th>Role</th>
              <th>Status</th>
              <th>Joined</th>
              {can.manageMembers ? <th aria-label="Actions" /> : null}
            </>
          }
        >
          {members.data.members.map((member) => (
            <MemberRow
              key={member.member_id}
              member={member}
              self={member.member_id === session.member.member_id}
            />
          ))}
        </DataTable>
      ) : null}
      {can.manageMembers ? <InvitesPanel /> : null}
    </>
  );
}
