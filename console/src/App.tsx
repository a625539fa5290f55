import { lazy, Suspense } from 'react';
import { ChunkBoundary } from './components/ChunkBoundary.tsx';
import { Navigate, Route, Routes } from 'react-router';
import { RequireSession } from './auth/RequireSession.tsx';
import { UnauthenticatedRedirect } from './auth/UnauthenticatedRedirect.tsx';
import { Layout } from './components/Layout.tsx';
import { LeftNotice } from './components/LeftNotice.tsx';
import { AuditPage } from './pages/audit/AuditPage.tsx';
import { JoinPage } from './pages/auth/JoinPage.tsx';
import { SignInPage } from './pages/auth/SignInPage.tsx';
import { SignUpPage } from './pages/auth/SignUpPage.tsx';
import { FeaturesPage } from './pages/features/FeaturesPage.tsx';
import { MembersPage } from './pages/members/MembersPage.tsx';
import { PlansPage } from './pages/plans/PlansPage.tsx';
import { ServiceAccountsPage } from './pages/service-accounts/ServiceAccountsPage.tsx';
import { SettingsPage } from './pages/settings/SettingsPage.tsx';
import { SubscriberPage } from './pages/subscribers/SubscriberPage.tsx';
import { SubscribersPage } from './pages/subscribers/SubscribersPage.tsx';
import { WebhookPage } from './pages/webhook/WebhookPage.tsx';

// The chart library is most of the bundle: loaded only when the usage page opens.
const UsagePage = lazy(async () => ({ default: (await import('./pages/usage/UsagePage.tsx')).UsagePage }));

export function App() {
  return (
    <>
      <UnauthenticatedRedirect />
      <Routes>
        <Route path="/sign-up" element={<SignUpPage />} />
        <Route
          path="/sign-in"
          element={
            <>
              <LeftNotice />
              <SignInPage />
            </>
          }
        />
        <Route path="/join/:token" element={<JoinPage />} />
        <Route
          element={
            <RequireSession>
              <Layout />
            </RequireSession>
          }
        >
          <Route index element={<Navigate to="/subscribers" replace />} />
          <Route path="/features" element={<FeaturesPage />} />
          <Route path="/plans" element={<PlansPage />} />
          <Route path="/subscribers" element={<SubscribersPage />} />
          <Route path="/subscribers/:subscriberId" element={<SubscriberPage />} />
          <Route
            path="/usage"
            element={
              <ChunkBoundary>
                <Suspense fallback={<p className="loading">Loading…</p>}>
                  <UsagePage />
                </Suspense>
              </ChunkBoundary>
            }
          />
          <Route path="/audit" element={<AuditPage />} />
          <Route path="/service-accounts" element={<ServiceAccountsPage />} />
          <Route path="/members" element={<MembersPage />} />
          <Route path="/webhook" element={<WebhookPage />} />
          <Route path="/settings" element={<SettingsPage />} />
          <Route path="*" element={<NotFound />} />
        </Route>
      </Routes>
    </>
  );
}

function NotFound() {
  return (
    <div className="notice notice-error" role="alert">
      This page does not exist.
    </div>
  );
}
