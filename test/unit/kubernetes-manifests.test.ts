import { readdirSync, readFileSync } from 'node:fs';
import { Deployment } from 'kubernetes-models/apps/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Service } from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { envName, SETTING_NAMES } from '../../src/config/load.js';
import { allRoutes } from '../../src/http/routes/index.js';
import { loadSettings } from '../../src/config/load.js';

/**
 * No Kubernetes cluster runs here: the manifests of deploy/kubernetes are checked offline
 * against the Kubernetes API schemas (kubernetes-models), and against the coordinator itself
 * (settings it knows, probe paths it serves).
 */
const DIR = new URL('../../deploy/kubernetes/', import.meta.url);
const read = (name: string) =>
  parse(readFileSync(new URL(name, DIR), 'utf8')) as Record<string, unknown>;
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  Deployment: Deployment,
  Service: Service,
  ConfigMap: ConfigMap,
  PodDisruptionBudget: PodDisruptionBudget,
};

const manifests = readdirSync(DIR)
  .filter((name) => name.endsWith('.yaml') && name !== 'kustomization.yaml')
  .map((name) => [name, read(name)] as const);

const deployment = read('deployment.yaml') as unknown as {
  spec: {
    replicas: number;
    template: {
      spec: {
        terminationGracePeriodSeconds: number;
        containers: Array<{
          env: Array<{ name: string; value?: string }>;
          readinessProbe: { httpGet: { path: string } };
          livenessProbe: { httpGet: { path: string } };
          lifecycle: { preStop: unknown };
          resources: { requests: { cpu: string; memory: string } };
        }>;
      };
    };
  };
};
const container = deployment.spec.template.spec.containers[0]!;

describe('deploy/kubernetes', () => {
  it.each(manifests)('%s is valid against the Kubernetes API schema', (_, manifest) => {
    const Model = MODELS[manifest.kind as string];
    expect(Model, `a model for ${String(manifest.kind)}`).toBeDefined();
    expect(() => new Model!(manifest as never).validate()).not.toThrow();
  });

  it('kustomization.yaml lists every manifest', () => {
    const kustomization = read('kustomization.yaml') as { resources: string[] };
    expect([...kustomization.resources].sort()).toEqual(manifests.map(([name]) => name).sort());
  });

  it('configures the coordinator only with settings it knows', () => {
    const known = new Set(SETTING_NAMES.map(envName));
    const config = read('configmap.yaml') as { data: Record<string, string> };
    for (const name of Object.keys(config.data)) expect(known, name).toContain(name);
    for (const { name } of container.env) {
      if (name === 'POD_NAME' || name === 'POD_IP') continue;
      expect(known, name).toContain(name);
    }
  });

  it('each pod advertises its own address and is its own replica', () => {
    const env = Object.fromEntries(container.env.map((e) => [e.name, e.value]));
    expect(env.COORDINATOR_HTTP_ADVERTISED_URL).toBe('http://$(POD_IP):8080');
    expect(env.COORDINATOR_REPLICA_ID).toBe('$(POD_NAME)');
    expect(deployment.spec.replicas).toBe(3);
  });

  it('probes paths the coordinator serves without a token, and leaves time for the handover', () => {
    const settings = loadSettings({
      env: {},
      overrides: { 'security.jwt-secret': 'x'.repeat(32) },
    });
    const open = allRoutes(settings, 'test')
      .filter((r) => r.method === 'get' && r.roles === null)
      .map((r) => r.path);
    expect(open).toContain(container.readinessProbe.httpGet.path);
    expect(open).toContain(container.livenessProbe.httpGet.path);
    expect(container.readinessProbe.httpGet.path).not.toBe(container.livenessProbe.httpGet.path);
    expect(container.lifecycle.preStop).toBeDefined();
    expect(deployment.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(30);
    expect(typeof container.resources.requests.cpu).toBe('string');
    expect(typeof container.resources.requests.memory).toBe('string');
  });
});
