import { PageHeader } from '../../components/PageHeader.tsx';
import { OrganizationForm } from './OrganizationForm.tsx';
import { PasswordForm } from './PasswordForm.tsx';

export function SettingsPage() {
  return (
    <>
      <PageHeader title="Settings" />
      <PasswordForm />
      <OrganizationForm />
    </>
  );
}
