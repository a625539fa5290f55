import { useMutation } from '@tanstack/react-query';
import { NavLink, Outlet } from 'react-router';
import { sessionApi } from '../api/session.ts';
import { useLeaveSignedIn } from '../auth/leave.ts';
import { usePermissions, useSession } from '../auth/session.ts';
import { Badge } from './Badge.tsx';

interface NavItem {
  to: string;
  label: string;
  show: boolean;
}

/** The signed-in frame: the left nav (only what the role may open), who is signed in, sign-out. */
export function Layout() {
  const session = useSession();
  const can = usePermissions();
  const leave = useLeaveSignedIn();
  // The cache is forgotten once this frame is gone (auth/leave.ts), never under it.
  const signOut = useMutation({
    mutationFn: sessionApi.signOut,
    onSettled: () => leave('/sign-in', 'signed-out'),
  });

  const sections: { title: string; items: NavItem[] }[] = [
    {
      title: 'Catalog',
      items: [
        { to: '/features', label: 'Features', show: true },
        { to: '/plans', label: 'Plans', show: true },
      ],
    },
    {
      title: 'Customers',
      items: [
        { to: '/subscribers', label: 'Subscribers', show: true },
        { to: '/usage', label: 'Usage', show: true },
      ],
    },
    {
      title: 'Organization',
      items: [
        { to: '/audit', label: 'Audit log', show: can.readAudit },
        { to: '/service-accounts', label: 'Service accounts', show: true },
        { to: '/members', label: 'Members', show: true },
        { to: '/webhook', label: 'Webhook', show: true },
        { to: '/settings', label: 'Settings', show: true },
      ],
    },
  ];

  return (
    <div className="shell">
      <nav className="sidebar" aria-label="Main">
        <div className="brand">
          <span className="brand-mark" aria-hidden="true">
            ◆
          </span>
          <span className="brand-name" data-testid="organization-name">
            {session.organization.name}
          </span>
          <span className="brand-slug">{session.organization.slug}</span>
        </div>
        {sections.map((section) => (
          <div className="nav-section" key={section.title}>
            <div className="nav-title">{section.title}</div>
            {section.items
              .filter((item) => item.show)
              .map((item) => (
                <NavLink key={item.to} to={item.to} className="nav-link">
                  {item.label}
                </NavLink>
              ))}
          </div>
        ))}
        <div className="sidebar-footer">
          <div className="whoami" data-testid="whoami">
            <span className="whoami-email">{session.member.email}</span>
            <Badge tone="info">{session.member.role}</Badge>
          </div>
          <button
            type="button"
            className="button button-small"
            onClick={() => signOut.mutate()}
            disabled={signOut.isPending}
          >
            Sign out
          </button>
        </div>
      </nav>
      <main className="content">
        <Outlet />
      </main>
    </div>
  );
}
