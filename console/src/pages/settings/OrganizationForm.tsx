import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { FormEvent } from 'react';
import { organizationApi, type Organization } from '../../api/organization.ts';
import { SESSION_KEY, usePermissions } from '../../auth/session.ts';
import { useEditedFields } from '../../components/edited-fields.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { TextField } from '../../components/TextField.tsx';

export function OrganizationForm() {
  const organization = useQuery({ queryKey: ['organization'], queryFn: organizationApi.get });
  return (
    <section className="panel">
      <h2>Organization</h2>
      <QueryState isPending={organization.isPending} error={organization.error} what="the organization" />
      {organization.data ? <OrganizationFields organization={organization.data} /> : null}
    </section>
  );
}

function OrganizationFields({ organization }: { organization: Organization }) {
  const can = usePermissions();
  const queryClient = useQueryClient();
  const fields = useEditedFields({ name: organization.name, slug: organization.slug });
  const save = useMutation({
    // Nothing edited: nothing to send (the latest record is what the form shows).
    mutationFn: async () => {
      const changed = fields.changed();
      return Object.keys(changed).length > 0 ? organizationApi.update(changed) : organization;
    },
    onSuccess: async (updated) => {
      queryClient.setQueryData(['organization'], updated);
      fields.reset();
      await queryClient.invalidateQueries({ queryKey: SESSION_KEY });
    },
  });
  const errors = formErrors(save.error, ['name', 'slug']);

  if (!can.writeOrg) {
    return (
      <dl className="facts">
        <dt>Name</dt>
        <dd>{organization.name}</dd>
        <dt>Slug</dt>
        <dd>{organization.slug}</dd>
        <dt>Created</dt>
        <dd>{formatTime(organization.created_at)}</dd>
      </dl>
    );
  }
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate();
  };
  return (
    <form onSubmit={submit} className="form form-narrow" noValidate>
      <ErrorNotice error={errors.general} />
      <TextField
        label="Organization name"
        value={fields.valueOf('name')}
        onChange={(value) => fields.edit('name', value)}
        error={errors.of('name')}
      />
      <TextField
        label="Organization slug"
        value={fields.valueOf('slug')}
        onChange={(value) => fields.edit('slug', value)}
        error={errors.of('slug')}
        hint="Members sign in with it; changing it changes the sign-in."
      />
      <button type="submit" className="button" disabled={save.isPending}>
        Save organization
      </button>
    </form>
  );
}
