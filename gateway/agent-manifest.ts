/**
 * The agent manifests GET /install/{token} renders. The agent is the OpenTelemetry Collector
 * (contrib distribution), which speaks OTLP to Sluice as is: host logs through the filelog
 * receiver, host metrics through hostmetrics, exported by otlphttp with the source's key.
 *
 *   kubernetes  (default) Namespace, Secret, ConfigMap and DaemonSet: `kubectl apply -f -`
 *   otelcol     the collector's config file for one host, key inline: `otelcol-contrib --config F`
 *   env         SLUICE_ENDPOINT and SLUICE_API_KEY as shell variables, for agents of your own
 *
 * The only credential in any of them is one ingestion key of one source: it can write
 * telemetry, and nothing else (Sluice keys cannot read or manage anything).
 * Values are written as JSON strings, which YAML reads as the same strings.
 */
export const MANIFEST_FORMATS = ['kubernetes', 'otelcol', 'env'] as const;
export type ManifestFormat = (typeof MANIFEST_FORMATS)[number];

/** Collector image the Kubernetes manifest runs (contrib: it has filelog and hostmetrics). */
export const COLLECTOR_IMAGE = 'otel/opentelemetry-collector-contrib:0.115.1';

export interface ManifestInput {
  /** Base URL of the ingest HTTP port, e.g. https://ingest.example.com (no trailing slash). */
  endpoint: string;
  apiKey: string;
  sourceId: string;
  /** When the install token expires (the key does not). */
  tokenExpiresAt: string;
}

export const MANIFEST_CONTENT_TYPES: Record<ManifestFormat, string> = {
  kubernetes: 'application/yaml; charset=utf-8',
  otelcol: 'application/yaml; charset=utf-8',
  env: 'text/plain; charset=utf-8',
};

export function renderManifest(format: ManifestFormat, input: ManifestInput): string {
  switch (format) {
    case 'kubernetes': return kubernetesManifest(input);
    case 'otelcol': return collectorConfig(input, { apiKey: q(input.apiKey), hostRoot: '', logFiles: ['/var/log/*.log', '/var/log/**/*.log'] }, '');
    case 'env': return `# Sluice ingestion for source ${input.sourceId}\nSLUICE_ENDPOINT=${input.endpoint}\nSLUICE_API_KEY=${input.apiKey}\n`;
  }
}

const q = (value: string) => JSON.stringify(value);

function header(input: ManifestInput): string {
  return (
    `# Sluice agent for source ${input.sourceId}: host logs and metrics, sent as OTLP to ${input.endpoint}.\n` +
    `# Its one credential is an ingestion key of this source; revoke it with \`sluice sources revoke-key\`.\n`
  );
}

interface CollectorSettings {
  /** The key as a YAML value: inline, or an environment reference. */
  apiKey: string;
  /** Where the host's / is mounted ('' on the host itself). */
  hostRoot: string;
  logFiles: string[];
}

function collectorConfig(input: ManifestInput, settings: CollectorSettings, indent: string): string {
  const lines = [
    'receivers:',
    '  filelog:',
    `    include: [${settings.logFiles.map(q).join(', ')}]`,
    '    include_file_path: true',
    '    start_at: end',
    ...(settings.hostRoot ? ['    operators:', '      - type: container'] : []),
    '  hostmetrics:',
    ...(settings.hostRoot ? [`    root_path: ${q(settings.hostRoot)}`] : []),
    '    collection_interval: 30s',
    '    scrapers: { cpu: {}, memory: {}, load: {}, disk: {}, filesystem: {}, network: {} }',
    'processors:',
    '  memory_limiter: { check_interval: 1s, limit_percentage: 80, spike_limit_percentage: 20 }',
    '  resourcedetection: { detectors: [env, system] }',
    '  batch: { send_batch_size: 2000, timeout: 5s }',
    'exporters:',
    '  otlphttp:',
    `    endpoint: ${q(input.endpoint)}`,
    '    compression: gzip',
    `    headers: { X-API-Key: ${settings.apiKey} }`,
    'service:',
    '  pipelines:',
    '    logs: { receivers: [filelog], processors: [memory_limiter, resourcedetection, batch], exporters: [otlphttp] }',
    '    metrics: { receivers: [hostmetrics], processors: [memory_limiter, resourcedetection, batch], exporters: [otlphttp] }',
  ];
  const body = lines.map((line) => indent + line).join('\n') + '\n';
  return indent ? body : header(input) + body;
}

function kubernetesManifest(input: ManifestInput): string {
  const labels = '{ app.kubernetes.io/name: sluice-agent, app.kubernetes.io/part-of: sluice }';
  const config = collectorConfig(input, { apiKey: q('${env:SLUICE_API_KEY}'), hostRoot: '/hostfs', logFiles: ['/var/log/pods/*/*/*.log'] }, '    ');
  return `${header(input)}# Apply: kubectl apply -f <this file>
apiVersion: v1
kind: Namespace
metadata: { name: sluice-agent, labels: ${labels} }
---
apiVersion: v1
kind: Secret
metadata: { name: sluice-agent, namespace: sluice-agent, labels: ${labels} }
type: Opaque
stringData:
  api-key: ${q(input.apiKey)}
---
apiVersion: v1
kind: ConfigMap
metadata: { name: sluice-agent, namespace: sluice-agent, labels: ${labels} }
data:
  config.yaml: |
${config}---
apiVersion: apps/v1
kind: DaemonSet
metadata: { name: sluice-agent, namespace: sluice-agent, labels: ${labels} }
spec:
  selector: { matchLabels: { app.kubernetes.io/name: sluice-agent } }
  template:
    metadata: { labels: ${labels} }
    spec:
      automountServiceAccountToken: false
      tolerations: [{ operator: Exists }]
      containers:
        - name: collector
          image: ${q(COLLECTOR_IMAGE)}
          args: ["--config=/conf/config.yaml"]
          env:
            - name: SLUICE_API_KEY
              valueFrom: { secretKeyRef: { name: sluice-agent, key: api-key } }
          resources:
            requests: { cpu: 50m, memory: 128Mi }
            limits: { memory: 512Mi }
          securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false }
          volumeMounts:
            - { name: config, mountPath: /conf, readOnly: true }
            - { name: varlogpods, mountPath: /var/log/pods, readOnly: true }
            - { name: hostfs, mountPath: /hostfs, readOnly: true, mountPropagation: HostToContainer }
      volumes:
        - { name: config, configMap: { name: sluice-agent } }
        - { name: varlogpods, hostPath: { path: /var/log/pods } }
        - { name: hostfs, hostPath: { path: / } }
`;
}
