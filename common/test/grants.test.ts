import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ROLES,
  ROLE_RANK,
  ROLE_SCOPES,
  SCOPES,
  canGrant,
  effectiveScopes,
  grantRefusal,
  keyManagementRefusal,
  type Grantor,
  type Role,
  type Scope,
} from '../src/auth/scopes.ts';

const OWN = 'sa_own';
const OTHER = 'sa_other';
const grantor = (role: Role, keyScopes: Scope[]): Grantor => ({ role, keyScopes, serviceAccountId: OWN });
const keyGrant = (scopes: Scope[], role: Role, serviceAccountId = OWN) =>
  ({ kind: 'key', scopes, target: { serviceAccountId, role } }) as const;

describe('key grants (table)', () => {
  // [caller role, caller key scopes, requested scopes, target role, target account, allowed, refused field]
  const table: [Role, Scope[], Scope[], Role, string, boolean, string?][] = [
    // The exploit: an org:write key minting full access on its own account.
    ['admin', ['org:write'], [], 'admin', OWN, false, 'scopes'],
    ['admin', ['org:write'], ['org:audit:read'], 'admin', OWN, false, 'scopes'],
    ['admin', ['org:write'], ['org:write'], 'admin', OWN, true],
    // The default scope `check` is a grant too.
    ['admin', ['org:write'], ['check'], 'admin', OWN, false, 'scopes'],
    ['admin', ['org:write', 'check'], ['check'], 'admin', OWN, true],
    // A full-access admin mints anything, on any account.
    ['admin', [], [], 'admin', OTHER, true],
    ['admin', [], ['org:audit:read'], 'viewer', OTHER, true],
    ['admin', [], [...SCOPES], 'developer', OTHER, true],
    // Every scope listed is still not full access: full access follows the role and may grow.
    ['admin', [...SCOPES], [], 'admin', OWN, false, 'scopes'],
    ['admin', [...SCOPES], [...SCOPES], 'admin', OWN, true],
    // A developer never mints onto an admin account, nor a scope its role lacks.
    ['developer', [], [], 'admin', OTHER, false, 'role'],
    ['developer', [], ['check'], 'admin', OTHER, false, 'role'],
    ['developer', [], [], 'developer', OTHER, true],
    ['developer', [], ['org:audit:read'], 'developer', OWN, false, 'scopes'],
    ['developer', [], ['org:audit:read'], 'viewer', OTHER, false, 'scopes'],
    // A viewer holds no write scope, and cannot grant one.
    ['viewer', [], ['catalog:read'], 'viewer', OWN, true],
    ['viewer', [], ['catalog:write'], 'viewer', OWN, false, 'scopes'],
    ['viewer', [], [], 'developer', OTHER, false, 'role'],
    // A restricted key manages only its own account's keys.
    ['admin', ['org:write', 'check'], ['check'], 'viewer', OTHER, false, 'service_account_id'],
    [
      'developer',
      ['org:write', 'catalog:read'],
      ['catalog:read', 'catalog:write'],
      'developer',
      OWN,
      false,
      'scopes',
    ],
    // Key scopes beyond the role are not held: a viewer's catalog:write key grants nothing.
    ['viewer', ['catalog:write', 'check'], ['catalog:write'], 'viewer', OWN, false, 'scopes'],
    ['viewer', ['catalog:write', 'check'], ['check'], 'viewer', OWN, true],
  ];

  it.each(table)(
    '%s key %j asks %j on a %s account (%s): %s',
    (role, held, asked, targetRole, account, allowed, field) => {
      const refusal = grantRefusal(grantor(role, held), keyGrant(asked, targetRole, account));
      expect(refusal === null).toBe(allowed);
      if (field) expect(refusal?.field).toBe(field);
    },
  );

  it('names exactly the scopes that exceed the caller', () => {
    const refusal = grantRefusal(
      grantor('admin', ['org:write', 'check']),
      keyGrant(['check', 'catalog:write', 'org:audit:read'], 'admin'),
    );
    expect(refusal).toMatchObject({ field: 'scopes', value: ['catalog:write', 'org:audit:read'] });
    expect(refusal?.message).toContain('catalog:write, org:audit:read');
  });
});

describe('role grants (table)', () => {
  const viewerRights: Scope[] = ['check', 'catalog:read', 'subscribers:read', 'org:read'];
  const table: [Role, Scope[], Role, boolean][] = [
    ['admin', [], 'admin', true],
    ['admin', [], 'viewer', true],
    ['admin', ['org:write'], 'viewer', false],
    ['admin', ['org:write'], 'admin', false],
    ['admin', [...viewerRights, 'org:write'], 'viewer', true],
    ['admin', [...viewerRights, 'org:write'], 'developer', false],
    ['admin', [...SCOPES], 'admin', true],
    ['developer', [], 'admin', false],
    ['developer', [], 'developer', true],
    ['viewer', [], 'viewer', true],
    ['viewer', [], 'developer', false],
  ];
  it.each(table)('%s key %j grants the %s role: %s', (role, held, granted, allowed) => {
    expect(canGrant(grantor(role, held), { kind: 'role', role: granted })).toBe(allowed);
  });
});

describe('key management', () => {
  it('a full-access key manages accounts up to its rank; a restricted key only its own', () => {
    expect(
      keyManagementRefusal(grantor('developer', []), { serviceAccountId: OTHER, role: 'developer' }),
    ).toBeNull();
    expect(
      keyManagementRefusal(grantor('developer', []), { serviceAccountId: OTHER, role: 'admin' })?.field,
    ).toBe('role');
    expect(
      keyManagementRefusal(grantor('admin', ['org:write']), { serviceAccountId: OWN, role: 'admin' }),
    ).toBeNull();
    expect(
      keyManagementRefusal(grantor('admin', ['org:write']), { serviceAccountId: OTHER, role: 'viewer' })
        ?.field,
    ).toBe('service_account_id');
  });
});

describe('properties', () => {
  const role = fc.constantFrom(...ROLES);
  const scopes = fc.subarray([...SCOPES]);
  // null: a console session (a person's, no service account of its own).
  const anyGrantor = fc.record({ role, keyScopes: scopes, serviceAccountId: fc.constantFrom<string | null>(OWN, OTHER, null) });
  const subset = (a: Set<Scope>, b: Set<Scope>) => [...a].every((scope) => b.has(scope));

  it('no key created is worth more than its creator, now or after its account is raised to the creator’s role', () => {
    fc.assert(
      fc.property(anyGrantor, scopes, role, fc.constantFrom(OWN, OTHER), (g, asked, targetRole, account) => {
        fc.pre(canGrant(g, keyGrant(asked, targetRole, account)));
        const mine = effectiveScopes(g.keyScopes, g.role);
        expect(subset(effectiveScopes(asked, targetRole), mine)).toBe(true);
        // Raising the account needs a role grant, which only someone holding the role may make.
        expect(subset(effectiveScopes(asked, g.role), mine)).toBe(true);
        if (asked.length === 0) expect(g.keyScopes).toEqual([]);
        expect(ROLE_RANK[targetRole]).toBeLessThanOrEqual(ROLE_RANK[g.role]);
      }),
      { numRuns: 2000 },
    );
  });

  it('a granted role never allows what its granter lacks', () => {
    fc.assert(
      fc.property(anyGrantor, role, (g, granted) => {
        fc.pre(canGrant(g, { kind: 'role', role: granted }));
        expect(subset(new Set(ROLE_SCOPES[granted]), effectiveScopes(g.keyScopes, g.role))).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('chains of grants from one root never exceed the root', () => {
    // Each step: the newest key (or member) grants a key or a role to the next; rights may only shrink.
    const step = fc.record({ kind: fc.constantFrom('key', 'role'), scopes, role, own: fc.boolean() });
    fc.assert(
      fc.property(anyGrantor, fc.array(step, { maxLength: 8 }), (root, steps) => {
        const rootRights = effectiveScopes(root.keyScopes, root.role);
        let current: Grantor = root;
        for (const [index, s] of steps.entries()) {
          const target = s.own
            ? { serviceAccountId: current.serviceAccountId ?? OWN, role: current.role }
            : { serviceAccountId: `sa_${index}`, role: s.role };
          const grant =
            s.kind === 'key'
              ? ({ kind: 'key', scopes: s.scopes, target } as const)
              : ({ kind: 'role', role: s.role } as const);
          if (!canGrant(current, grant)) continue;
          current =
            grant.kind === 'key'
              ? { role: target.role, keyScopes: s.scopes, serviceAccountId: target.serviceAccountId }
              : { role: s.role, keyScopes: [], serviceAccountId: `sa_${index}` };
          expect(subset(effectiveScopes(current.keyScopes, current.role), rootRights)).toBe(true);
        }
      }),
      { numRuns: 1000 },
    );
  });
});
