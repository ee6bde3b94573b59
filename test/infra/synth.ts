import { App, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { CloudAssembly } from 'aws-cdk-lib/cx-api';
import { AwsSolutionsChecks } from 'cdk-nag';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlPlaneStack, type ControlPlaneProps } from '../../infra/stack.js';

/**
 * Synthesising a stack is the slow part of these tests (seconds each, tens
 * of seconds with its functions bundled): each shape is synthesised once per
 * test file, in a `beforeAll` or on first use, and shared by every test that
 * reads it.
 */

/**
 * A hook that synthesises stacks: one with its functions bundled takes about
 * 15 s here; five times that, for a machine three times slower and busy.
 */
export const SYNTH_HOOK_TIMEOUT = 300_000;

/** A test that synthesises a few variants without bundling (a few seconds each here), on a machine three times slower. */
export const VARIANT_TEST_TIMEOUT = 180_000;

export type Resource = { Type: string; Properties: Record<string, unknown> };

export interface Synthesised {
  readonly stack: ControlPlaneStack;
  readonly template: Template;
  readonly json: { Resources: Record<string, Resource>; Outputs?: Record<string, unknown> };
  /** Set when the app was synthesised whole (bundled, or checked by cdk-nag). */
  readonly assembly: CloudAssembly | null;
}

export interface SynthOptions {
  /** Bundle the functions (esbuild) into a temporary cloud assembly: for tests that load the bundles. */
  readonly bundle?: boolean;
  /** Run cdk-nag over the app: its synth throws on any unacknowledged finding. */
  readonly nag?: boolean;
}

const cache = new Map<string, Synthesised>();

/** The stack `id` with `props`, synthesised once per file for each shape (props made of plain data only). */
export function synthStack(id: string, props: ControlPlaneProps = {}, o: SynthOptions = {}): Synthesised {
  const key = JSON.stringify([id, props, o]);
  const kept = cache.get(key);
  if (kept) return kept;
  const app = new App({
    ...(o.bundle ? { outdir: mkdtempSync(join(tmpdir(), 'rollout-cdk-')) } : {}),
    context: { 'aws:cdk:bundling-stacks': o.bundle ? [id] : [] },
  });
  const stack = new ControlPlaneStack(app, id, props);
  if (o.nag) Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  const assembly = o.bundle || o.nag ? app.synth() : null;
  const template = Template.fromStack(stack);
  const made: Synthesised = { stack, template, json: template.toJSON() as Synthesised['json'], assembly };
  cache.set(key, made);
  return made;
}

/** A function's IAM policies in `json` (by its role's logical id), as one string. */
export function policyText(json: Synthesised['json'], fn: string): string {
  return JSON.stringify(
    Object.entries(json.Resources)
      .filter(([id, r]) => r.Type === 'AWS::IAM::Policy' && id.toLowerCase().startsWith(`${fn.toLowerCase()}servicerole`))
      .map(([, r]) => r.Properties.PolicyDocument),
  );
}
