import { useState } from 'react';
import type { Feature, FeatureKind } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { Badge, type BadgeTone } from '../../components/Badge.tsx';
import { DataTable } from '../../components/DataTable.tsx';
import { formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { PageHeader } from '../../components/PageHeader.tsx';
import { CreateFeatureForm } from './CreateFeatureForm.tsx';
import { EditFeatureRow } from './EditFeatureRow.tsx';
import { useFeatures } from './queries.ts';

const KIND_TONE: Record<FeatureKind, BadgeTone> = { flag: 'info', limit: 'neutral', metered: 'good' };

export function FeaturesPage() {
  const can = usePermissions();
  const features = useFeatures();
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<string | null>(null);

  return (
    <>
      <PageHeader
        title="Features"
        description="The catalog that plans grant: flags (on or off), limits (a number, or unlimited) and metered features (a limit on use, counted per period)."
        actions={
          can.writeCatalog && !creating ? (
            <button type="button" className="button button-primary" onClick={() => setCreating(true)}>
              New feature
            </button>
          ) : null
        }
      />
      {creating ? <CreateFeatureForm onDone={() => setCreating(false)} /> : null}
      <QueryState isPending={features.isPending} error={features.error} what="features" />
      {features.data ? (
        <DataTable
          testId="features-table"
          columns={6}
          empty={features.data.items.length === 0 && 'No features yet.'}
          head={
            <>
              <th>Key</th>
              <th>Name</th>
              <th>Kind</th>
              <th>Description</th>
              <th>Updated</th>
              {can.writeCatalog ? <th aria-label="Actions" /> : null}
            </>
          }
        >
          {features.data.items.map((feature: Feature) =>
            editing === feature.key ? (
              <EditFeatureRow key={feature.key} feature={feature} onDone={() => setEditing(null)} />
            ) : (
              <tr key={feature.key} data-testid={`feature-row-${feature.key}`}>
                <td>
                  <code>{feature.key}</code>
                </td>
                <td>{feature.name}</td>
                <td>
                  <Badge tone={KIND_TONE[feature.kind]}>{feature.kind}</Badge>
                </td>
                <td className="cell-muted">{feature.description}</td>
                <td className="cell-nowrap">{formatTime(feature.updated_at)}</td>
                {can.writeCatalog ? (
                  <td className="cell-actions">
                    <button
                      type="button"
                      className="button button-small"
                      onClick={() => setEditing(feature.key)}
                    >
                      Edit
                    </button>
                  </td>
                ) : null}
              </tr>
            ),
          )}
        </DataTable>
      ) : null}
    </>
  );
}
