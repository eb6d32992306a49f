import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parsePrometheusText, samplesOf, sumOf } from '../helpers/prometheus-text.js';

describe('parsePrometheusText(text)', () => {
  it('reads HELP, TYPE and samples with labels, special values and timestamps', () => {
    const parsed = parsePrometheusText(
      [
        '# HELP http_requests_total Requests answered,\\nby code.',
        '# TYPE http_requests_total counter',
        'http_requests_total{method="post",code="200"} 1027 1395066363000',
        'http_requests_total{method="post",code="400",} 3',
        '# A free comment',
        '',
        '# TYPE temperature gauge',
        'temperature -1.5e3',
        'temperature{kind="upper"} +Inf',
        'temperature{kind="lower"} -Inf',
        'temperature{kind="unknown"} NaN',
        'temperature{kind="lag"} Nan',
      ].join('\n'),
    );
    expect(parsed.families.get('http_requests_total')).toEqual({
      name: 'http_requests_total',
      type: 'counter',
      help: 'Requests answered,\nby code.',
    });
    expect(parsed.families.get('temperature')?.type).toBe('gauge');
    expect(samplesOf(parsed, 'http_requests_total')).toEqual([
      { name: 'http_requests_total', labels: { method: 'post', code: '200' }, value: 1027 },
      { name: 'http_requests_total', labels: { method: 'post', code: '400' }, value: 3 },
    ]);
    expect(sumOf(parsed, 'http_requests_total', { method: 'post' })).toBe(1030);
    expect(sumOf(parsed, 'http_requests_total', { code: '500' })).toBe(0);
    expect(samplesOf(parsed, 'temperature').map((s) => s.value)).toEqual([-1500, Infinity, -Infinity, NaN, NaN]);
  });

  it('unescapes label values: backslash, double quote and newline', () => {
    const parsed = parsePrometheusText('m{path="C:\\\\dir\\\\x",quote="say \\"hi\\"",lines="a\\nb",brace="}{,="} 1');
    expect(parsed.samples[0]!.labels).toEqual({ path: 'C:\\dir\\x', quote: 'say "hi"', lines: 'a\nb', brace: '}{,=' });
  });

  it('reads what prom-client writes, histograms included', async () => {
    const registry = new Registry();
    const counter = new Counter({ name: 'jobs_total', help: 'Jobs.', labelNames: ['kind'], registers: [registry] });
    const histogram = new Histogram({ name: 'job_seconds', help: 'Job time.', buckets: [0.1, 1], registers: [registry] });
    counter.inc({ kind: 'a "quoted"\\kind' }, 2);
    histogram.observe(0.05);
    histogram.observe(0.5);
    histogram.observe(5);
    const parsed = parsePrometheusText(await registry.metrics());
    expect(sumOf(parsed, 'jobs_total', { kind: 'a "quoted"\\kind' })).toBe(2);
    expect(parsed.families.get('job_seconds')?.type).toBe('histogram');
    expect(samplesOf(parsed, 'job_seconds_bucket').map((s) => [s.labels.le, s.value])).toEqual([
      ['0.1', 1],
      ['1', 2],
      ['+Inf', 3],
    ]);
    expect(sumOf(parsed, 'job_seconds_count')).toBe(3);
    expect(sumOf(parsed, 'job_seconds_sum')).toBeCloseTo(5.55);
  });

  it.each([
    ['a value that is not a number', 'm 12abc'],
    ['no value', 'm{a="1"}'],
    ['an unterminated label value', 'm{a="1} 2'],
    ['an unquoted label value', 'm{a=1} 2'],
    ['a bad escape', 'm{a="\\t"} 2'],
    ['a label given twice', 'm{a="1",a="2"} 2'],
    ['an unknown type', '# TYPE m countr'],
    ['a bad timestamp', 'm 1 soon'],
    ['too many fields', 'm 1 2 3'],
    ['a line without a name', '{a="1"} 2'],
  ])('refuses %s', (_why, text) => {
    expect(() => parsePrometheusText(text)).toThrow(/^line 1: /);
  });
});
