/**
 * The agent manifests GET /install/{token} renders. The agent is the OpenTelemetry Collector
 * (contrib distribution), which speaks OTLP to Sluice as is: host logs through the file_log
 * receiver, host metrics through hostmetrics, exported by otlp_http with the source's key.
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

/**
 * Collector image the Kubernetes manifest runs (contrib: it has file_log and hostmetrics): the
 * newest release when this was written (0.159.0, tags of open-telemetry/opentelemetry-collector-releases).
 * The config below uses the component names of 0.149 and later: the filelog receiver is
 * `file_log` since 0.149 and the otlphttp exporter `otlp_http` since 0.144 (the old names are
 * deprecated aliases that log a warning).
 */
export const COLLECTOR_IMAGE = 'otel/opentelemetry-collector-contrib:0.159.0';

/** The oldest otelcol-contrib that reads the config the `otelcol` format renders. */
export const MIN_COLLECTOR_VERSION = '0.149.0';

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
    case 'otelcol': return collectorConfig(input, HOST_COLLECTOR(input.apiKey), '');
    case 'env': return `# Sluice ingestion for source ${input.sourceId}\nSLUICE_ENDPOINT=${input.endpoint}\nSLUICE_API_KEY=${input.apiKey}\n`;
  }
}

const q = (value: string) => JSON.stringify(value);
const list = (values: readonly string[]) => `[${values.map(q).join(', ')}]`;

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
  logFiles: readonly string[];
  /** Log files not to read: the agent's own, which would otherwise loop back into itself. */
  excludeFiles: readonly string[];
  /** Kubernetes container logs: parse the runtime's line format and the path's pod metadata. */
  containerLogs: boolean;
}

const HOST_COLLECTOR = (apiKey: string): CollectorSettings => ({
  apiKey: q(apiKey), hostRoot: '', logFiles: ['/var/log/*.log', '/var/log/**/*.log'], excludeFiles: [], containerLogs: false,
});

/**
 * Mounts and file systems that are not the host's disks (the upstream Helm chart's hostMetrics
 * preset leaves out the same): pseudo file systems, and the per-pod volumes and container
 * layers, which would add series for every pod.
 */
const PSEUDO_MOUNT_POINTS = ['^/dev($|/)', '^/proc($|/)', '^/sys($|/)', '^/run/k3s/containerd($|/)', '^/var/lib/docker($|/)', '^/var/lib/kubelet($|/)', '^/snap($|/)'];
const PSEUDO_FS_TYPES = [
  'autofs', 'binfmt_misc', 'bpf', 'cgroup2', 'configfs', 'debugfs', 'devpts', 'devtmpfs', 'fusectl', 'hugetlbfs', 'iso9660',
  'mqueue', 'nsfs', 'overlay', 'proc', 'procfs', 'pstore', 'rpc_pipefs', 'securityfs', 'selinuxfs', 'squashfs', 'sysfs', 'tracefs',
];

function collectorConfig(input: ManifestInput, settings: CollectorSettings, indent: string): string {
  const lines = [
    'receivers:',
    '  file_log:',
    `    include: ${list(settings.logFiles)}`,
    ...(settings.excludeFiles.length > 0 ? [`    exclude: ${list(settings.excludeFiles)}`] : []),
    '    include_file_path: true',
    '    start_at: end',
    ...(settings.containerLogs ? ['    operators: [{ type: container }]'] : []),
    '  hostmetrics:',
    ...(settings.hostRoot ? [`    root_path: ${q(settings.hostRoot)}`] : []),
    '    collection_interval: 30s',
    '    scrapers:',
    '      cpu: {}',
    '      memory: {}',
    '      load: {}',
    '      disk: {}',
    '      network: {}',
    '      filesystem:',
    `        exclude_mount_points: { match_type: regexp, mount_points: ${list(PSEUDO_MOUNT_POINTS)} }`,
    `        exclude_fs_types: { match_type: strict, fs_types: ${list(PSEUDO_FS_TYPES)} }`,
    'processors:',
    '  memory_limiter: { check_interval: 1s, limit_percentage: 80, spike_limit_percentage: 20 }',
    '  resourcedetection: { detectors: [env, system] }',
    '  batch: { send_batch_size: 2000, timeout: 5s }',
    'exporters:',
    '  otlp_http:',
    `    endpoint: ${q(input.endpoint)}`,
    '    compression: gzip',
    `    headers: { X-API-Key: ${settings.apiKey} }`,
    'service:',
    '  pipelines:',
    '    logs: { receivers: [file_log], processors: [memory_limiter, resourcedetection, batch], exporters: [otlp_http] }',
    '    metrics: { receivers: [hostmetrics], processors: [memory_limiter, resourcedetection, batch], exporters: [otlp_http] }',
  ];
  const body = lines.map((line) => indent + line).join('\n') + '\n';
  return indent ? body : `${header(input)}# For otelcol-contrib ${MIN_COLLECTOR_VERSION} or newer: otelcol-contrib --config <this file>\n${body}`;
}

/** The namespace and name of everything the Kubernetes manifest creates. */
const NAME = 'sluice-agent';
const CONTAINER = 'collector';

function kubernetesManifest(input: ManifestInput): string {
  const labels = `{ app.kubernetes.io/name: ${NAME}, app.kubernetes.io/part-of: sluice }`;
  const config = collectorConfig(input, {
    apiKey: q('${env:SLUICE_API_KEY}'),
    hostRoot: '/hostfs',
    // <namespace>_<pod>_<uid>/<container>/<restart>.log, written by the container runtime.
    logFiles: ['/var/log/pods/*/*/*.log'],
    excludeFiles: [`/var/log/pods/${NAME}_*/${CONTAINER}/*.log`],
    containerLogs: true,
  }, '    ');
  return `${header(input)}# Apply: kubectl apply -f <this file>
apiVersion: v1
kind: Namespace
metadata: { name: ${NAME}, labels: ${labels} }
---
apiVersion: v1
kind: Secret
metadata: { name: ${NAME}, namespace: ${NAME}, labels: ${labels} }
type: Opaque
stringData:
  api-key: ${q(input.apiKey)}
---
apiVersion: v1
kind: ConfigMap
metadata: { name: ${NAME}, namespace: ${NAME}, labels: ${labels} }
data:
  config.yaml: |
${config}---
apiVersion: apps/v1
kind: DaemonSet
metadata: { name: ${NAME}, namespace: ${NAME}, labels: ${labels} }
spec:
  selector: { matchLabels: { app.kubernetes.io/name: ${NAME} } }
  template:
    metadata: { labels: ${labels} }
    spec:
      # No Kubernetes API access: pod metadata comes from the log paths, the node's name from the downward API.
      automountServiceAccountToken: false
      tolerations: [{ operator: Exists }]
      containers:
        - name: ${CONTAINER}
          image: ${q(COLLECTOR_IMAGE)}
          args: ["--config=/conf/config.yaml"]
          env:
            - name: SLUICE_API_KEY
              valueFrom: { secretKeyRef: { name: ${NAME}, key: api-key } }
            - name: K8S_NODE_NAME
              valueFrom: { fieldRef: { fieldPath: spec.nodeName } }
            # Read by the env detector: in a pod the system detector would name the host after the pod.
            - name: OTEL_RESOURCE_ATTRIBUTES
              value: "k8s.node.name=$(K8S_NODE_NAME),host.name=$(K8S_NODE_NAME)"
          resources:
            requests: { cpu: 50m, memory: 128Mi }
            limits: { memory: 512Mi }
          # Root: container runtimes write pod logs as root, mode 0600 (CRI-O) or 0640, which the
          # image's own user (10001) cannot read (opentelemetry-collector-contrib#38002). The upstream
          # Helm chart (opentelemetry-helm-charts, charts/opentelemetry-collector/templates/_pod.tpl)
          # sets runAsUser 0 / runAsGroup 0 for its logs preset only with storeCheckpoints and
          # otherwise leaves it to you; here logs are read out of the box. The rest stays locked
          # down: no privilege escalation, a read-only root file system, read-only host mounts.
          securityContext: { runAsUser: 0, runAsGroup: 0, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true }
          volumeMounts:
            - { name: config, mountPath: /conf, readOnly: true }
            - { name: varlogpods, mountPath: /var/log/pods, readOnly: true }
            # Where /var/log/pods links to on nodes whose runtime is Docker (mounted by the upstream chart too).
            - { name: varlibdockercontainers, mountPath: /var/lib/docker/containers, readOnly: true }
            - { name: hostfs, mountPath: /hostfs, readOnly: true, mountPropagation: HostToContainer }
      volumes:
        - { name: config, configMap: { name: ${NAME} } }
        - { name: varlogpods, hostPath: { path: /var/log/pods } }
        - { name: varlibdockercontainers, hostPath: { path: /var/lib/docker/containers } }
        - { name: hostfs, hostPath: { path: / } }
`;
}
