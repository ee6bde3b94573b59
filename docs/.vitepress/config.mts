import { defineConfig } from 'vitepress';

/**
 * The docs site: `npm run docs` serves it, `npm run docs:build` builds it to
 * docs/.vitepress/dist, offline (no search index service, no fonts fetched).
 * The sidebar is by what a reader is trying to do; reference pages under
 * reference/ are generated from the code.
 */
const sidebar = [
  {
    text: 'Getting started',
    items: [
      { text: 'On one machine', link: '/getting-started/local' },
      { text: 'As a package', link: '/getting-started/package' },
      { text: 'A cluster', link: '/getting-started/cluster' },
      { text: 'On AWS', link: '/getting-started/aws' },
    ],
  },
  {
    text: 'Concepts',
    items: [
      { text: 'Guarantees', link: '/concepts/guarantees' },
      { text: 'Leases and fencing', link: '/concepts/leases-and-fencing' },
      { text: 'Rollouts and stages', link: '/concepts/rollouts' },
      { text: 'Gates and judges', link: '/concepts/gates' },
      { text: 'Actuators and assignment', link: '/concepts/actuators-and-assignment' },
      { text: 'Work runs', link: '/concepts/work-runs' },
      { text: 'Stealing and drain', link: '/concepts/stealing-and-drain' },
    ],
  },
  {
    text: 'Guides',
    items: [
      { text: 'Gate on Prometheus', link: '/guides/prometheus' },
      { text: 'Gate on CloudWatch', link: '/guides/cloudwatch' },
      { text: 'Shift a Lambda alias', link: '/guides/lambda-alias' },
      { text: 'Shift an ALB', link: '/guides/alb' },
      { text: 'Split with nginx', link: '/guides/nginx' },
      { text: 'OpenFeature', link: '/guides/openfeature' },
      { text: 'Run your own worker', link: '/guides/own-worker' },
      { text: 'Use the command line', link: '/guides/cli' },
      { text: 'Gate a pipeline', link: '/guides/pipeline' },
      { text: 'Multi-region', link: '/guides/multi-region' },
    ],
  },
  {
    text: 'Operating',
    items: [
      { text: 'Deploy', link: '/operating/deploy' },
      { text: 'Security and threat model', link: '/operating/security' },
      { text: 'Observability and alerts', link: '/operating/observability' },
      { text: 'Capacity and cost', link: '/operating/capacity-and-cost' },
      { text: 'Retention', link: '/operating/retention' },
      { text: 'Upgrades', link: '/operating/upgrades' },
    ],
  },
  {
    text: 'Reference',
    items: [
      { text: 'HTTP API', link: '/reference/api' },
      { text: 'CLI', link: '/reference/cli' },
      { text: 'Configuration', link: '/reference/configuration' },
      { text: 'Metrics and alerts', link: '/reference/metrics' },
      { text: 'Rollout spec', link: '/reference/spec' },
      { text: 'Benchmark figures', link: '/reference/benchmarks' },
    ],
  },
  {
    text: 'Development',
    items: [
      { text: 'Architecture', link: '/development/architecture' },
      { text: 'Layout', link: '/development/layout' },
      { text: 'Testing', link: '/development/testing' },
      { text: 'Chaos', link: '/development/chaos' },
      { text: 'Explorer', link: '/development/explorer' },
      { text: 'Benchmarks', link: '/development/benchmarks' },
    ],
  },
];

export default defineConfig({
  title: 'rollout control plane',
  description: 'Progressive rollouts and distributed work runs, kept safe by leases with epoch fencing.',
  // The client package's README lives beside its package, outside the site; it is linked, not a page.
  ignoreDeadLinks: [/packages\/client\/README/],
  markdown: {
    // Inline code is shown as written: a `{{version}}` dimension template must not be read as Vue interpolation.
    config(md) {
      const inline = md.renderer.rules.code_inline!;
      md.renderer.rules.code_inline = (tokens, idx, options, env, self) => {
        tokens[idx]!.attrSet('v-pre', '');
        return inline(tokens, idx, options, env, self);
      };
    },
  },
  themeConfig: {
    nav: [
      { text: 'Getting started', link: '/getting-started/local' },
      { text: 'Concepts', link: '/concepts/rollouts' },
      { text: 'Guides', link: '/guides/prometheus' },
      { text: 'Operating', link: '/operating/deploy' },
      { text: 'Reference', link: '/reference/api' },
      { text: 'Development', link: '/development/architecture' },
    ],
    sidebar,
    outline: [2, 3],
    search: { provider: 'local' },
  },
});
