/**
 * The API's scopes and roles, and what each role may ever do (SPEC 5.2): the servers enforce them, the console
 * shows and offers them. Plain constants, so the console's bundle takes this module as is.
 */
export const SCOPES = [
  'check',
  'catalog:read',
  'catalog:write',
  'subscribers:read',
  'subscribers:write',
  'usage:write',
  'org:read',
  'org:write',
  'org:audit:read',
] as const;
export type Scope = (typeof SCOPES)[number];

export const ROLES = ['admin', 'developer', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

const READ_SCOPES: Scope[] = ['check', 'catalog:read', 'subscribers:read', 'org:read'];

/** What each role may ever do; a key's rights are its scopes intersected with its member's role. */
export const ROLE_SCOPES: Record<Role, ReadonlySet<Scope>> = {
  admin: new Set(SCOPES),
  developer: new Set(SCOPES.filter((s) => s !== 'org:audit:read')),
  viewer: new Set(READ_SCOPES),
};

/** Roles are nested (viewer ⊂ developer ⊂ admin); a rank says which is higher. */
export const ROLE_RANK: Record<Role, number> = { viewer: 0, developer: 1, admin: 2 };
