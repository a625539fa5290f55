import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { SERVICE_ENTRY_POINTS } from '../../scripts/build-services.ts';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** The metrics the services export (METRIC_SOURCES). */
const METRIC_SOURCES = [
  'common/src/http/metrics.ts',
  'admin/src/plugins/admin-metrics.ts',
  'admin/src/features/outbox/metrics.ts',
  'admin/src/features/webhook/metrics.ts',
  'gateway/src/plugins/gateway-metrics.ts',
];
const EXPORTED = [
  'http_request_duration_seconds',
  'gateway_redis_errors_total',
  'gateway_redis_round_trips_total',
  'gateway_offline_evals_pending',
  'gateway_cache_requests_total',
  'gateway_snapshot_rebuild_requests_total',
  'snapshot_rebuilds_total',
  'queue_depth',
  'outbox_pending_rows',
  'outbox_oldest_pending_age_seconds',
  'webhook_deliveries_pending',
  'webhook_deliveries_failed_last_hour',
];
const HISTOGRAMS = ['http_request_duration_seconds'];
const SERIES = new Set([
  ...EXPORTED,
  ...HISTOGRAMS.flatMap((name) => ['_bucket', '_count', '_sum'].map((suffix) => name + suffix)),
]);
const baseName = (series: string) => HISTOGRAMS.find((name) => series.startsWith(`${name}_`)) ?? series;

const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
]);

/** Metric names a PromQL expression selects: identifiers outside strings, matchers, ranges, groupings and numbers that are not calls. */
function metricNamesIn(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/(?<![a-zA-Z0-9_:])\d[\w.]*/g, ' ');
  const names = [...bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?/g)]
    .filter((match) => match[1] === undefined)
    .map((match) => match[0])
    .filter((name) => !KEYWORDS.has(name));
  return [...new Set(names)];
}

const unknownIn = (expr: string) => metricNamesIn(expr).filter((name) => !SERIES.has(name));

describe('metricNamesIn', () => {
  it('finds the selected metrics and nothing else', () => {
    expect(
      metricNamesIn(
        'histogram_quantile(0.99, sum by (le, route) (rate(http_request_duration_seconds_bucket{route=~"/org/x", job="gw"}[5m]))) > 0.05',
      ),
    ).toEqual(['http_request_duration_seconds_bucket']);
    expect(
      metricNamesIn('max(deriv(outbox_pending_rows[10m])) > 0 and max(outbox_pending_rows offset 1h) > 1e2'),
    ).toEqual(['outbox_pending_rows']);
    expect(metricNamesIn('sum by (job) (rate(gateway_redis_errors_totl[5m])) / queue_depth')).toEqual([
      'gateway_redis_errors_totl',
      'queue_depth',
    ]);
  });
});

describe('the exported metric list', () => {
  it('matches what the services register', () => {
    const sources = METRIC_SOURCES.map(read).join('');
    for (const name of EXPORTED) expect(sources, name).toContain(`'${name}'`);
  });
});

interface Rule {
  alert?: string;
  expr?: unknown;
  for?: unknown;
  labels?: { severity?: unknown };
  annotations?: { summary?: unknown; description?: unknown; runbook?: unknown };
}

describe('deploy/prometheus/alerts.yaml', () => {
  const file = parse(read('deploy/prometheus/alerts.yaml')) as { groups: { name: string; rules: Rule[] }[] };
  const rules = file.groups.flatMap((group) => group.rules);
  const runbookAnchors = new Set(
    [...read('docs/operations.md').matchAll(/^#+\s+(.+)$/gm)].map((match) =>
      match[1]!
        .trim()
        .toLowerCase()
        .replace(/[^a-z0-9 -]/g, '')
        .replace(/ /g, '-'),
    ),
  );

  it('gives every alert an expression, a duration, a severity, a summary, a description and a runbook that exists', () => {
    expect(rules.length).toBeGreaterThan(0);
    for (const rule of rules) {
      expect(rule.alert, JSON.stringify(rule)).toMatch(/^[A-Z][A-Za-z]+$/);
      expect(typeof rule.expr, rule.alert).toBe('string');
      expect(rule.for, rule.alert).toMatch(/^\d+[smh]$/);
      expect(rule.labels?.severity, rule.alert).toMatch(/^(critical|warning)$/);
      expect(rule.annotations?.summary, rule.alert).toEqual(expect.any(String));
      expect(rule.annotations?.description, rule.alert).toEqual(expect.any(String));
      const runbook = String(rule.annotations?.runbook);
      expect(runbook, rule.alert).toBe(`docs/operations.md#${rule.alert!.toLowerCase()}`);
      expect(runbookAnchors, `${rule.alert}: ${runbook}`).toContain(runbook.split('#')[1]);
    }
    expect(new Set(rules.map((rule) => rule.alert)).size).toBe(rules.length);
  });

  it('selects only metrics the services export', () => {
    for (const rule of rules) expect(unknownIn(String(rule.expr)), rule.alert).toEqual([]);
  });

  it('covers outbox lag and growth, Redis errors, 5xx, eval latency, webhook failures and offline evals', () => {
    const used = new Set(rules.flatMap((rule) => metricNamesIn(String(rule.expr)).map(baseName)));
    for (const name of [
      'outbox_oldest_pending_age_seconds',
      'outbox_pending_rows',
      'gateway_redis_errors_total',
      'http_request_duration_seconds',
      'webhook_deliveries_failed_last_hour',
      'gateway_offline_evals_pending',
    ]) {
      expect(used, name).toContain(name);
    }
    const exprs = rules.map((rule) => String(rule.expr));
    expect(exprs.some((expr) => expr.includes('status=~"5.."'))).toBe(true);
    expect(
      exprs.some((expr) => expr.includes('histogram_quantile(0.99') && expr.includes('entitlements')),
    ).toBe(true);
  });
});

interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type?: string; uid?: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: { expr: string; datasource?: { uid?: string } }[];
}

describe('deploy/grafana/entitlements-dashboard.json', () => {
  const dashboard = JSON.parse(read('deploy/grafana/entitlements-dashboard.json')) as {
    schemaVersion: number;
    templating: { list: { name: string; type: string; query: unknown }[] };
    panels: Panel[];
  };
  const graphs = dashboard.panels.filter((panel) => panel.type !== 'row');

  it('is a schema 39 dashboard on a ${DS_PROMETHEUS} datasource variable', () => {
    expect(dashboard.schemaVersion).toBe(39);
    expect(dashboard.templating.list).toContainEqual(
      expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource', query: 'prometheus' }),
    );
    for (const panel of graphs) {
      expect(panel.datasource?.uid, panel.title).toBe('${DS_PROMETHEUS}');
      for (const target of panel.targets ?? [])
        expect(target.datasource?.uid, panel.title).toBe('${DS_PROMETHEUS}');
    }
  });

  it('lays out panels with unique ids inside the 24-column grid', () => {
    expect(new Set(dashboard.panels.map((panel) => panel.id)).size).toBe(dashboard.panels.length);
    for (const panel of dashboard.panels)
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24);
  });

  it('queries only exported metrics, and every one of them', () => {
    const used = new Set<string>();
    for (const panel of graphs) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) {
        expect(unknownIn(target.expr), panel.title).toEqual([]);
        for (const name of metricNamesIn(target.expr)) used.add(baseName(name));
      }
    }
    expect([...used].sort()).toEqual([...EXPORTED].sort());
  });
});

interface Container {
  name: string;
  env?: { name: string; value: string }[];
  readinessProbe?: { httpGet?: { path?: string } };
  livenessProbe?: { httpGet?: { path?: string } };
}

describe('deploy/k8s/entitlements.yaml and deploy/compose.yaml', () => {
  /** SHUTDOWN_TIMEOUT_MS as configured, else the default. */
  const shutdownTimeoutMs = (value: string | undefined) => Number(value ?? 10_000);

  it('probe readiness on /readyz and let every service finish its shutdown before the kill', () => {
    const deployments = parseAllDocuments(read('deploy/k8s/entitlements.yaml'))
      .map(
        (doc) =>
          doc.toJS() as {
            kind: string;
            spec: { template: { spec: { terminationGracePeriodSeconds?: number; containers: Container[] } } };
          },
      )
      .filter((doc) => doc.kind === 'Deployment');
    const served = deployments.filter((doc) =>
      doc.spec.template.spec.containers.some((container) => container.readinessProbe),
    );
    expect(served.map((doc) => doc.spec.template.spec.containers[0]!.name).sort()).toEqual([
      'admin',
      'gateway',
    ]);
    for (const { spec } of served) {
      const container = spec.template.spec.containers[0]!;
      expect(container.readinessProbe?.httpGet?.path, container.name).toBe('/readyz');
      expect(container.livenessProbe?.httpGet?.path, container.name).toBe('/healthz');
      const timeout = shutdownTimeoutMs(
        container.env?.find((env) => env.name === 'SHUTDOWN_TIMEOUT_MS')?.value,
      );
      const drain = Number(container.env?.find((env) => env.name === 'SHUTDOWN_DRAIN_DELAY_MS')?.value ?? 0);
      expect(drain, container.name).toBeGreaterThan(0);
      expect(drain, container.name).toBeLessThan(timeout);
      expect((spec.template.spec.terminationGracePeriodSeconds ?? 30) * 1000, container.name).toBeGreaterThan(
        timeout,
      );
    }

    const compose = parse(read('deploy/compose.yaml'), { merge: true }) as {
      services: Record<
        string,
        { environment?: Record<string, string>; stop_grace_period?: string; healthcheck?: { test: string[] } }
      >;
    };
    for (const [name, port] of [
      ['gateway', 3000],
      ['admin', 3001],
    ] as const) {
      const service = compose.services[name]!;
      expect(service.healthcheck?.test.join(' '), name).toContain(`http://127.0.0.1:${port}/readyz`);
      const grace = Number(/^(\d+)s$/.exec(service.stop_grace_period ?? '10s')?.[1]) * 1000;
      expect(grace, name).toBeGreaterThan(shutdownTimeoutMs(service.environment?.SHUTDOWN_TIMEOUT_MS));
    }
  });
});

describe('deploy defaults carry no working secret', () => {
  const composeText = read('deploy/compose.yaml');
  const compose = parse(composeText, { merge: true }) as {
    services: Record<string, { environment?: Record<string, string>; command?: string[] | string }>;
  };
  const SECRET_NAMES = ['DATABASE_URL', 'DATABASE_OWNER_URL', 'REDIS_URL', 'SECRETS_KEY', 'INTERNAL_TOKEN'];

  it('compose: every password and key is a required variable, never a literal', () => {
    expect(composeText).not.toMatch(/POSTGRES_HOST_AUTH_METHOD|trust/);
    const required = /^\$\{[A-Z_]+:\?[^}]+\}$/;
    for (const [name, service] of Object.entries(compose.services)) {
      const env = service.environment ?? {};
      for (const key of [
        'POSTGRES_PASSWORD',
        'APP_DB_PASSWORD',
        'REDIS_PASSWORD',
        'SECRETS_KEY',
        'INTERNAL_TOKEN',
      ]) {
        if (key in env) expect(env[key], `${name} ${key}`).toMatch(required);
      }
      for (const key of ['DATABASE_URL', 'DATABASE_OWNER_URL', 'REDIS_URL']) {
        if (!(key in env)) continue;
        const url = env[key]!;
        // The credentials part of the URL: user, then ':' and a required variable, nothing typed in.
        expect(url, `${name} ${key}`).toMatch(/^(postgres|redis):\/\/[a-z_]*:\$\{[A-Z_]+:\?[^}]+\}@/);
      }
    }
    expect(compose.services.postgres!.environment!.POSTGRES_PASSWORD).toBe(
      '${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}',
    );
  });

  it('compose: services use the restricted role; the owner URL goes to migrate only; Redis requires a password', () => {
    for (const [name, service] of Object.entries(compose.services)) {
      const env = service.environment ?? {};
      if (env.DATABASE_URL) expect(env.DATABASE_URL, name).toMatch(/^postgres:\/\/entitlements_app:/);
      if (name !== 'migrate') expect(env, name).not.toHaveProperty('DATABASE_OWNER_URL');
    }
    expect(compose.services.gateway!.environment).not.toHaveProperty('DATABASE_URL');
    expect(compose.services.gateway!.environment).not.toHaveProperty('SECRETS_KEY');
    expect(String(compose.services.redis!.command)).toContain('--requirepass "$$REDIS_PASSWORD"');
    expect(read('deploy/postgres/create-app-role.sh')).toContain(
      "CREATE ROLE entitlements_app LOGIN PASSWORD :'app_password'",
    );
  });

  interface K8sEnv {
    name: string;
    value?: string;
    valueFrom?: { secretKeyRef?: { name: string; key: string } };
  }
  interface K8sDoc {
    kind: string;
    metadata: { name: string };
    data?: Record<string, string>;
    spec?: {
      podSelector?: { matchLabels?: Record<string, string> };
      ingress?: {
        from: { podSelector?: { matchLabels?: Record<string, string> } }[];
        ports: { port: number }[];
      }[];
      template?: {
        spec: {
          containers: {
            name: string;
            env?: K8sEnv[];
            envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
          }[];
        };
      };
    };
  }
  const k8s = parseAllDocuments(read('deploy/k8s/entitlements.yaml')).map((doc) => doc.toJS() as K8sDoc);

  it('k8s: no Secret with values in the file; every secret from the Secret by secretKeyRef, none inline', () => {
    expect(k8s.filter((doc) => doc.kind === 'Secret')).toEqual([]);
    for (const doc of k8s.filter((d) => d.kind === 'ConfigMap')) {
      for (const key of Object.keys(doc.data ?? {})) expect(SECRET_NAMES, key).not.toContain(key);
    }
    const containers = k8s.flatMap((doc) => doc.spec?.template?.spec.containers ?? []);
    expect(containers.map((c) => c.name).sort()).toEqual(['admin', 'gateway', 'migrate', 'worker']);
    const needs: Record<string, string[]> = {
      migrate: ['DATABASE_OWNER_URL', 'DATABASE_URL'],
      gateway: ['INTERNAL_TOKEN', 'REDIS_URL'],
      admin: ['DATABASE_URL', 'INTERNAL_TOKEN', 'REDIS_URL', 'SECRETS_KEY'],
      worker: ['DATABASE_URL', 'REDIS_URL', 'SECRETS_KEY'],
    };
    for (const container of containers) {
      expect(
        container.envFrom?.some((from) => from.secretRef),
        container.name,
      ).toBe(false);
      const secrets = (container.env ?? []).filter((env) => SECRET_NAMES.includes(env.name));
      for (const env of secrets) {
        expect(env.value, `${container.name} ${env.name}`).toBeUndefined();
        expect(env.valueFrom?.secretKeyRef, `${container.name} ${env.name}`).toEqual({
          name: 'entitlements',
          key: env.name,
        });
      }
      expect(secrets.map((env) => env.name).sort(), container.name).toEqual(needs[container.name]);
    }
  });

  it('k8s: a NetworkPolicy lets only gateway pods reach admin port 3001', () => {
    const policies = k8s.filter((doc) => doc.kind === 'NetworkPolicy');
    const admin = policies.find((doc) => doc.spec?.podSelector?.matchLabels?.app === 'entitlements-admin');
    expect(admin).toBeDefined();
    const toAdminPort = admin!.spec!.ingress!.filter((rule) => rule.ports.some((port) => port.port === 3001));
    expect(toAdminPort).toHaveLength(1);
    expect(toAdminPort[0]!.from).toEqual([{ podSelector: { matchLabels: { app: 'entitlements-gateway' } } }]);
  });

  it('.dockerignore keeps history, installs, tests and env files out of the image', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line && !line.startsWith('#'));
    for (const entry of [
      '.git',
      '**/node_modules',
      '.env',
      'test-support',
      'admin/test',
      'gateway/test',
      'common/test',
    ])
      expect(ignored, entry).toContain(entry);
    // The Dockerfile's dependency stage copies every workspace's package.json.
    for (const copied of read('deploy/Dockerfile').matchAll(/^COPY (?!--from)(\S+)/gm))
      if (copied[1] !== '.') expect(ignored, copied[1]).not.toContain(copied[1]);
    expect(ignored).toContain('!bench/package.json');
  });
});

describe('the image runs the compiled build on plain node', () => {
  const stages = read('deploy/Dockerfile')
    .split(/^(?=FROM )/m)
    .filter((stage) => stage.startsWith('FROM '));
  const runtime = stages.at(-1)!;
  const instruction = (stage: string, name: string) =>
    JSON.parse(new RegExp(`^${name} (\\[.*\\])$`, 'm').exec(stage)?.[1] ?? 'null') as string[] | null;
  /** What each deployed process runs: the bundle `npm run build` writes for it. */
  const bundleOf = { gateway: 'gateway', admin: 'admin', worker: 'worker', migrate: 'entctl' } as const;
  const bundle = (name: keyof typeof SERVICE_ENTRY_POINTS) => `dist/${name}.js`;
  const withoutFlags = (args: string[] | null | undefined) => (args ?? []).filter((arg) => !arg.startsWith('--'));

  it('Dockerfile: a stage runs npm run build; the last copies its dist/ and starts node on a bundle, no tsx', () => {
    const build = stages.find((stage) => /^RUN .*npm run build\b/m.test(stage));
    expect(build).toBeDefined();
    const buildName = /^FROM \S+ AS (\S+)/.exec(build!)?.[1];
    expect(runtime).toMatch(new RegExp(`^COPY --from=${buildName} /app/dist \\./dist$`, 'm'));
    // What the bundles read at run time, where the source has it.
    expect(runtime).toMatch(new RegExp(`^COPY --from=${buildName} /app/common/src/redis/lua `, 'm'));
    expect(runtime).toMatch(new RegExp(`^COPY --from=${buildName} /app/console/dist `, 'm'));
    expect(instruction(runtime, 'ENTRYPOINT')).toEqual(['node', '--enable-source-maps']);
    // The gateway's V8 flags come before its bundle (young-generation.test.ts checks them).
    expect(withoutFlags(instruction(runtime, 'CMD'))).toEqual([bundle('gateway')]);
    expect(runtime).not.toContain('tsx');
    expect(runtime).not.toMatch(/^RUN .*npm/m);
    // The dependencies the last stage copies are installed without dev dependencies (tsx is one).
    expect(stages.find((stage) => stage.includes('--omit=dev'))).toBeDefined();
    const pkg = JSON.parse(read('package.json')) as { dependencies?: Record<string, string> };
    expect(Object.keys(pkg.dependencies ?? {})).not.toContain('tsx');
  });

  it('compose and k8s: every process runs its bundle', () => {
    const compose = parse(read('deploy/compose.yaml'), { merge: true }) as {
      services: Record<string, { build?: unknown; command?: string[] }>;
    };
    const built = Object.entries(compose.services).filter(([, service]) => service.build);
    expect(built.map(([name]) => name).sort()).toEqual(Object.keys(bundleOf).sort());
    for (const [name, service] of built)
      expect(withoutFlags(service.command)[0], name).toBe(bundle(bundleOf[name as keyof typeof bundleOf]));

    const containers = parseAllDocuments(read('deploy/k8s/entitlements.yaml')).flatMap(
      (doc) =>
        (
          doc.toJS() as {
            spec?: { template?: { spec: { containers: { name: string; args?: string[] }[] } } };
          }
        ).spec?.template?.spec.containers ?? [],
    );
    expect(containers.map((container) => container.name).sort()).toEqual(Object.keys(bundleOf).sort());
    for (const container of containers)
      expect(withoutFlags(container.args)[0], container.name).toBe(
        bundle(bundleOf[container.name as keyof typeof bundleOf]),
      );
  });
});
