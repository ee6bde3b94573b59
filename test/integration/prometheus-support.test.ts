/**
 * The test support for a real Prometheus (test/support/prometheus.ts): it
 * scrapes an exporter the test controls, answers queries with what it
 * scraped, and can crash and come back with its data, which the gate tests
 * rely on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PrometheusApiError, queryVector, startExporter, startPrometheus, waitForSeries, type Exporter, type PrometheusServer } from '../support/prometheus.js';

describe('a real Prometheus scraping a test exporter', () => {
  let exporter: Exporter;
  let prometheus: PrometheusServer;
  beforeAll(async () => {
    exporter = await startExporter();
    prometheus = await startPrometheus({ targets: [exporter.target], scrapeIntervalMs: 200 });
  });
  afterAll(async () => {
    await prometheus?.stop();
    await exporter?.close();
  });

  it('reports a counter the exporter raised, with its labels', async () => {
    const requests = exporter.counter('app_requests_total', 'requests served', ['version']);
    requests.inc({ version: 'v2' }, 3);
    const [first] = await waitForSeries(prometheus.url, 'app_requests_total{version="v2"}', ([s]) => s?.value === 3);
    expect(first?.metric).toMatchObject({ __name__: 'app_requests_total', job: 'app', instance: exporter.target, version: 'v2' });

    requests.inc({ version: 'v2' }, 4);
    const [raised] = await waitForSeries(prometheus.url, 'app_requests_total{version="v2"}', ([s]) => s?.value === 7);
    expect(raised?.value).toBe(7);
  });

  it('rejects a malformed query with the API error, without waiting', async () => {
    const err: unknown = await waitForSeries(prometheus.url, 'app_requests_total{').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PrometheusApiError);
    expect(err).toMatchObject({ httpStatus: 400, errorType: 'bad_data' });
  });

  it('refuses connections once killed, and after a restart answers with its data and scrapes again', async () => {
    const errors = exporter.counter('app_errors_total', 'requests failed', ['version']);
    errors.inc({ version: 'v2' });
    await waitForSeries(prometheus.url, 'app_errors_total', ([s]) => s?.value === 1);

    await prometheus.kill();
    const down: unknown = await queryVector(prometheus.url, 'app_errors_total').catch((e: unknown) => e);
    expect(down).toMatchObject({ code: 'ECONNREFUSED' });

    await prometheus.restart();
    // Ready means the WAL was replayed: what was scraped before the kill is there before any new scrape.
    expect((await queryVector(prometheus.url, 'app_errors_total')).map((s) => s.value)).toEqual([1]);
    errors.inc({ version: 'v2' }, 2);
    await waitForSeries(prometheus.url, 'app_errors_total', ([s]) => s?.value === 3);
  });
});
