import { readFileSync } from 'node:fs';
import path from 'node:path';
import { metricNamesOf } from '../../test/support/promql';
import { RuntimeMetrics } from './runtime-metrics';

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

const dashboard = JSON.parse(readFileSync(path.resolve(__dirname, '../../docs/grafana-dashboard.json'), 'utf8')) as {
  panels: Panel[];
};
const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));

/**
 * docs/grafana-dashboard.json queries only series the runtime exports: each PromQL expression parses, and each
 * metric it names is a series of the registry (a histogram's _bucket, _sum and _count included). The Temporal
 * core's series (temporal_*) are not in the registry: test/integration/metrics.spec.ts checks those against a
 * real worker's scrape.
 */
describe('the Grafana dashboard', () => {
  let exported: Set<string>;
  beforeAll(async () => {
    exported = await new RuntimeMetrics().seriesNames();
  });

  it('has queries, and every panel has one', () => {
    expect(queries.length).toBeGreaterThan(30);
    expect(
      dashboard.panels.filter((p) => p.type !== 'row' && (p.targets ?? []).length === 0).map((p) => p.title),
    ).toEqual([]);
  });

  it.each(queries.map((q) => [q.panel, q.expr]))('%s: %s names only exported series', (_, expr) => {
    const names = metricNamesOf(expr);
    expect(names.length).toBeGreaterThan(0);
    const missing = names.filter((n) => !n.startsWith('temporal_') && !exported.has(n));
    expect(missing).toEqual([]);
  });

  it('reads what the expressions name, and refuses what is not PromQL', () => {
    expect(
      metricNamesOf(
        'histogram_quantile(0.99, sum by (le, transport) (rate(a_bucket{x="1"}[5m]))) / on (instance) group_left b',
      ),
    ).toEqual(['a_bucket', 'b']);
    expect(() => metricNamesOf('sum(rate(a[5m])')).toThrow(/unbalanced/);
    expect(() => metricNamesOf('rates(a[5m])')).toThrow(/unknown function rates/);
    expect(() => metricNamesOf('a{x=1}')).toThrow(/bad label matchers/);
  });
});
