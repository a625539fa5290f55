import { useQuery } from '@tanstack/react-query';
import { sessionApi } from '../api/session.ts';
import type { Session } from '../api/types.ts';
import { permissionsOf, type Permissions } from './permissions.ts';

export const SESSION_KEY = ['session'] as const;

export const useSessionQuery = () =>
  useQuery({ queryKey: SESSION_KEY, queryFn: sessionApi.current, retry: false, staleTime: 60_000 });

/** The signed-in session; only called below RequireSession, which renders nothing until it is known. */
export function useSession(): Session {
  const { data } = useSessionQuery();
  if (!data) throw new Error('useSession outside RequireSession');
  return data;
}

export const usePermissions = (): Permissions => permissionsOf(useSession().member.role);
