/**
 * The Kubernetes manifests (deploy/kubernetes: a kustomize base and two overlays) checked without
 * a cluster: every object against the Kubernetes API's schemas (kubernetes-models, and KEDA's for
 * the ScaledObject), every kustomization's resources present and every file of the base listed,
 * and what the objects say of Sluice true of Sluice: its roles, its settings' names, its probe
 * paths and ports, the stream and durable consumer KEDA watches, selectors that match.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as apps from 'kubernetes-models/apps/v1';
import * as autoscaling from 'kubernetes-models/autoscaling/v2';
import * as batch from 'kubernetes-models/batch/v1';
import * as policy from 'kubernetes-models/policy/v1';
import * as core from 'kubernetes-models/v1';
import * as keda from '@kubernetes-models/keda/keda.sh/v1alpha1';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { DURABLE, streamOf } from '../bus/jetstream-names.ts';
import { OPTIONS } from '../core/config.ts';

const ROOT = fileURLToPath(new URL('./kubernetes/', import.meta.url));
/** Not Kubernetes objects: kustomize's own files, and prometheus-adapter's rule. */
const NOT_OBJECTS = new Set(['kustomization.yaml', 'hpa-metric-rule.yaml']);

type Model = new (data: never) => { validate(): void };
const MODELS: Record<string, Model> = {
  'v1/Namespace': core.Namespace, 'v1/ConfigMap': core.ConfigMap, 'v1/Secret': core.Secret, 'v1/Service': core.Service,
  'apps/v1/Deployment': apps.Deployment, 'batch/v1/Job': batch.Job, 'autoscaling/v2/HorizontalPodAutoscaler': autoscaling.HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': policy.PodDisruptionBudget, 'keda.sh/v1alpha1/ScaledObject': keda.ScaledObject,
};

interface K8sObject { apiVersion: string; kind: string; metadata: { name: string; labels?: Record<string, string> }; spec?: any; data?: Record<string, string>; stringData?: Record<string, string> }

function yamlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? yamlFiles(path) : name.endsWith('.yaml') ? [path] : [];
  });
}
const parse = (path: string) => parseAllDocuments(readFileSync(path, 'utf8')).map((doc) => {
  expect(doc.errors, path).toEqual([]);
  return doc.toJS() as K8sObject;
});
const objects = yamlFiles(ROOT).filter((path) => !NOT_OBJECTS.has(path.split('/').pop()!)).flatMap((path) => parse(path).map((object) => ({ path, object })));
const ofKind = (kind: string) => objects.map(({ object }) => object).filter((object) => object.kind === kind);

describe('the Kubernetes manifests', () => {
  it('are valid Kubernetes (and KEDA) objects', () => {
    expect(objects.length).toBeGreaterThan(10);
    for (const { path, object } of objects) {
      const Model = MODELS[`${object.apiVersion}/${object.kind}`];
      expect(Model, `${path}: ${object.apiVersion} ${object.kind}`).toBeDefined();
      expect(() => new Model!(object as never).validate(), `${path}: ${object.kind} ${object.metadata.name}`).not.toThrow();
    }
  });

  it('name every resource of each kustomization, and the base names every file of its own', () => {
    for (const path of yamlFiles(ROOT).filter((one) => one.endsWith('kustomization.yaml'))) {
      const [kustomization] = parse(path) as unknown as Array<{ resources: string[] }>;
      for (const resource of kustomization!.resources) {
        const target = join(dirname(path), resource);
        const exists = (() => { try { return statSync(target).isDirectory() ? statSync(join(target, 'kustomization.yaml')).isFile() : true; } catch { return false; } })();
        expect(exists, `${path}: ${resource}`).toBe(true);
      }
    }
    const [base] = parse(join(ROOT, 'base/kustomization.yaml')) as unknown as Array<{ resources: string[] }>;
    expect(readdirSync(join(ROOT, 'base')).filter((name) => name !== 'kustomization.yaml').sort()).toEqual([...base!.resources].sort());
  });

  it('say of Sluice what is true: its roles, its settings, its probes and ports', () => {
    const settings = new Set(OPTIONS.map((option) => option.env));
    for (const map of [...ofKind('ConfigMap').map((m) => m.data ?? {}), ...ofKind('Secret').map((s) => s.stringData ?? {})]) {
      for (const name of Object.keys(map)) expect(settings.has(name), name).toBe(true);
    }
    const roles = new Map([['sluice-gateway', 'gateway'], ['sluice-consumer', 'consume'], ['sluice-deliver', 'deliver']]);
    for (const deployment of ofKind('Deployment')) {
      const [container] = deployment.spec.template.spec.containers;
      expect(container.args, deployment.metadata.name).toEqual([roles.get(deployment.metadata.name)]);
      for (const { name } of container.env ?? []) expect(settings.has(name), name).toBe(true);
      expect(container.livenessProbe.httpGet.path).toBe('/api/v1/health');
      expect(container.readinessProbe.httpGet.path).toBe('/api/v1/ready');
      const http = container.ports.find((port: { containerPort: number }) => port.containerPort === 4318);
      expect(http, `${deployment.metadata.name} serves health on the OTLP/HTTP port's default`).toBeDefined();
      // Selectors select the pods: the Deployment's own, its PDB's, its Service's.
      const labels = deployment.spec.template.metadata.labels;
      expect(deployment.spec.selector.matchLabels).toEqual(labels);
      const budget = ofKind('PodDisruptionBudget').find((pdb) => pdb.metadata.name === deployment.metadata.name);
      expect(budget?.spec.selector.matchLabels, `${deployment.metadata.name}'s PodDisruptionBudget`).toEqual(labels);
    }
    expect(ofKind('Job')[0]!.spec.template.spec.containers[0].args).toEqual(['migrate']);
    const gateway = ofKind('Deployment').find((d) => d.metadata.name === 'sluice-gateway')!;
    expect(ofKind('Service').find((s) => s.metadata.name === 'sluice-gateway')!.spec.selector).toEqual(gateway.spec.template.metadata.labels);
    expect(gateway.spec.template.spec.containers[0].ports.map((p: { containerPort: number }) => p.containerPort).sort()).toEqual([4317, 4318, 4320, 8080]);
  });

  it('scale what exists: the gateways on CPU, the consumers on the lag of the stream Sluice names', () => {
    const deployments = new Set(ofKind('Deployment').map((d) => d.metadata.name));
    for (const hpa of ofKind('HorizontalPodAutoscaler')) expect(deployments.has(hpa.spec.scaleTargetRef.name), hpa.metadata.name).toBe(true);
    const [scaled] = ofKind('ScaledObject');
    expect(deployments.has(scaled!.spec.scaleTargetRef.name)).toBe(true);
    const [trigger] = scaled!.spec.triggers;
    expect(trigger.type).toBe('nats-jetstream');
    expect(trigger.metadata.stream).toBe(streamOf('SLUICE', 'otel_traces').stream);
    expect(trigger.metadata.consumer).toBe(DURABLE);
    const lagHpa = ofKind('HorizontalPodAutoscaler').find((hpa) => hpa.spec.metrics[0].type === 'External')!;
    expect(lagHpa.spec.metrics[0].external.metric.name).toBe('sluice_consumer_lag_messages');
  });
});
