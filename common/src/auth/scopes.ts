export const SCOPES = [
  'check',
  'catalog:read',
  'catalog:write',
  'subscribers:read',
  'subscribers:write',
  'org:read',
  'org:write',
  'org:audit:read',
] as const;
export type Scope = (typeof SCOPES)[number];

export const ROLES = ['admin', 'developer', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

export const DEFAULT_KEY_SCOPES: Scope[] = ['check'];

const READ_SCOPES: Scope[] = ['check', 'catalog:read', 'subscribers:read', 'org:read'];

/** What each role may ever do; a key's rights are its scopes intersected with its member's role. */
export const ROLE_SCOPES: Record<Role, ReadonlySet<Scope>> = {
  admin: new Set(SCOPES),
  developer: new Set(SCOPES.filter((s) => s !== 'org:audit:read')),
  viewer: new Set(READ_SCOPES),
};

export const isScope = (value: string): value is Scope => (SCOPES as readonly string[]).includes(value);
export const isRole = (value: string): value is Role => (ROLES as readonly string[]).includes(value);

/** An empty scope list is "Full access": every scope the role allows. */
export function effectiveScopes(keyScopes: readonly Scope[], role: Role): Set<Scope> {
  const allowedByRole = ROLE_SCOPES[role];
  if (keyScopes.length === 0) return new Set(allowedByRole);
  return new Set(keyScopes.filter((s) => allowedByRole.has(s)));
}

export type AuthType = 'member_apikey' | 'member_session';

/** Who is calling, as resolved from the X-API-Key header. */
export interface Principal {
  organizationId: string;
  memberId: string;
  serviceAccountId: string;
  keyId: string;
  keyPrefix: string;
  role: Role;
  keyScopes: Scope[];
  scopes: Set<Scope>;
  authType: AuthType;
}
