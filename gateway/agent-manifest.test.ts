/**
 * The agent manifests as Kubernetes and the collector read them: every document of the
 * Kubernetes manifest validated against the Kubernetes JSON schemas of its kind
 * (kubernetes-models), the DaemonSet able to read the node's pod logs, and a collector config
 * that uses the current image's component names.
 */
import { DaemonSet } from 'kubernetes-models/apps/v1';
import { ConfigMap, Namespace, Secret } from 'kubernetes-models/v1';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { COLLECTOR_IMAGE, MIN_COLLECTOR_VERSION, renderManifest, type ManifestInput } from './agent-manifest.ts';

const INPUT: ManifestInput = {
  endpoint: 'https://ingest.example.com',
  apiKey: 'slk_test"key\\with:yaml',
  sourceId: 'src_123',
  tokenExpiresAt: '2026-11-23T10:00:00.000Z',
};

/** The kinds the manifest may hold, each with the model whose JSON schema validates it. */
const MODELS: Record<string, { apiVersion: string; validate(doc: object): void }> = Object.fromEntries(
  [Namespace, Secret, ConfigMap, DaemonSet].map((Model) => [
    Model.kind,
    { apiVersion: Model.apiVersion, validate: (doc: object) => new Model(doc as never).validate() },
  ]),
);

function parseYaml(text: string): any[] {
  const documents = parseAllDocuments(text);
  for (const doc of documents) expect(doc.errors, String(doc.errors)).toEqual([]);
  return documents.map((doc) => doc.toJS());
}

/** Validates every document by its kind; a kind we have no schema for fails. */
function validateManifest(documents: any[]): void {
  for (const [i, doc] of documents.entries()) {
    const model = MODELS[doc.kind];
    if (!model) throw new Error(`document ${i}: unknown kind ${doc.kind}`);
    expect(doc.apiVersion, `document ${i} (${doc.kind})`).toBe(model.apiVersion);
    model.validate(doc);
  }
}

const kubernetes = () => parseYaml(renderManifest('kubernetes', INPUT));
const daemonSetOf = (documents: any[]) => documents.find((doc) => doc.kind === 'DaemonSet');

/** 0.159.0 → [0, 159, 0], for ordering versions. */
const versionParts = (version: string) => version.split('.').map(Number);
const compareVersions = (a: string, b: string) => {
  const [x, y] = [versionParts(a), versionParts(b)];
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return 0;
};

describe('Kubernetes manifest', () => {
  it('is valid Kubernetes: every document passes the JSON schema of its kind', () => {
    const documents = kubernetes();
    expect(documents.map((doc) => doc.kind)).toEqual(['Namespace', 'Secret', 'ConfigMap', 'DaemonSet']);
    validateManifest(documents);
  });

  it('fails validation for a broken document and for an unknown kind', () => {
    const documents = kubernetes();
    const broken = structuredClone(documents);
    delete daemonSetOf(broken).spec.template.spec.volumes[1].hostPath.path;
    expect(() => validateManifest(broken)).toThrow('volumes/1/hostPath must have required property path');
    expect(() => validateManifest([...documents, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'x' } }]))
      .toThrow('document 4: unknown kind ServiceAccount');
  });

  it('runs a current collector image', () => {
    const container = daemonSetOf(kubernetes()).spec.template.spec.containers[0];
    expect(container.image).toBe(COLLECTOR_IMAGE);
    const [, repository, tag] = /^(.+):(\d+\.\d+\.\d+)$/.exec(container.image)!;
    expect(repository).toBe('otel/opentelemetry-collector-contrib');
    // 0.159.0 was the newest release of opentelemetry-collector-releases when this was written.
    expect(compareVersions(tag!, '0.159.0')).toBeGreaterThanOrEqual(0);
    expect(compareVersions(tag!, MIN_COLLECTOR_VERSION)).toBeGreaterThanOrEqual(0);
  });

  it('mounts the pod logs read-only and reads them as root, without privilege escalation', () => {
    const pod = daemonSetOf(kubernetes()).spec.template.spec;
    const container = pod.containers[0];
    const hostPaths = new Map(pod.volumes.filter((v: any) => v.hostPath).map((v: any) => [v.name, v.hostPath.path]));
    const mounted = new Map(container.volumeMounts.map((m: any) => [m.mountPath, m]));
    for (const path of ['/var/log/pods', '/var/lib/docker/containers']) {
      const mount = mounted.get(path) as any;
      expect(mount, path).toBeDefined();
      expect(mount.readOnly, path).toBe(true);
      expect(hostPaths.get(mount.name), path).toBe(path);
    }
    expect(container.volumeMounts.every((m: any) => m.readOnly === true)).toBe(true);
    expect(container.securityContext).toEqual({ runAsUser: 0, runAsGroup: 0, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
    expect(pod.automountServiceAccountToken).toBe(false);
  });

  it('names the node from the downward API, and the key from the Secret', () => {
    const documents = kubernetes();
    const env = new Map(daemonSetOf(documents).spec.template.spec.containers[0].env.map((e: any) => [e.name, e]));
    expect((env.get('K8S_NODE_NAME') as any).valueFrom).toEqual({ fieldRef: { fieldPath: 'spec.nodeName' } });
    expect((env.get('OTEL_RESOURCE_ATTRIBUTES') as any).value).toBe('k8s.node.name=$(K8S_NODE_NAME),host.name=$(K8S_NODE_NAME)');
    expect((env.get('SLUICE_API_KEY') as any).valueFrom).toEqual({ secretKeyRef: { name: 'sluice-agent', key: 'api-key' } });
    expect(documents[1].stringData['api-key']).toBe(INPUT.apiKey);
  });
});

describe('collector config', () => {
  const configs = {
    kubernetes: () => parseYaml(kubernetes().find((doc) => doc.kind === 'ConfigMap').data['config.yaml'])[0],
    otelcol: () => parseYaml(renderManifest('otelcol', INPUT))[0],
  };

  for (const [format, config] of Object.entries(configs)) {
    it(`${format}: uses the component names of ${MIN_COLLECTOR_VERSION} and later, each one defined`, () => {
      const { receivers, processors, exporters, service } = config();
      expect(Object.keys(receivers)).toEqual(['file_log', 'hostmetrics']);
      expect(Object.keys(exporters)).toEqual(['otlp_http']);
      // Renamed (filelog → file_log in 0.149, otlphttp → otlp_http in 0.144) or removed (logging).
      for (const old of ['filelog', 'otlphttp', 'logging']) expect({ ...receivers, ...exporters }).not.toHaveProperty(old);
      for (const pipeline of Object.values<any>(service.pipelines)) {
        for (const name of pipeline.receivers) expect(receivers).toHaveProperty([name]);
        for (const name of pipeline.processors) expect(processors).toHaveProperty([name]);
        for (const name of pipeline.exporters) expect(exporters).toHaveProperty([name]);
      }
      expect(exporters.otlp_http).toMatchObject({ endpoint: INPUT.endpoint, compression: 'gzip' });
      expect(receivers.hostmetrics.scrapers.filesystem.exclude_fs_types.fs_types).toContain('overlay');
    });
  }

  it('kubernetes: reads container logs, not its own, with the host mounted for host metrics', () => {
    const { receivers, exporters } = configs.kubernetes();
    expect(receivers.file_log).toMatchObject({
      include: ['/var/log/pods/*/*/*.log'],
      exclude: ['/var/log/pods/sluice-agent_*/collector/*.log'],
      operators: [{ type: 'container' }],
    });
    expect(receivers.hostmetrics.root_path).toBe('/hostfs');
    expect(exporters.otlp_http.headers).toEqual({ 'X-API-Key': '${env:SLUICE_API_KEY}' });
  });

  it('otelcol: carries the key inline and says which collector it is for', () => {
    const text = renderManifest('otelcol', INPUT);
    expect(text).toContain(`# For otelcol-contrib ${MIN_COLLECTOR_VERSION} or newer`);
    const { receivers, exporters } = parseYaml(text)[0];
    expect(exporters.otlp_http.headers).toEqual({ 'X-API-Key': INPUT.apiKey });
    expect(receivers.file_log).not.toHaveProperty('operators');
    expect(receivers.hostmetrics).not.toHaveProperty('root_path');
  });
});
