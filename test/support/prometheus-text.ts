/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4), for tests that read `/metrics`.
 *
 * Why our own: prom-client renders the format but parses none, no maintained and typed parser is installed here
 * (and helpers add no dependency), and a test wants a strict one anyway: it refuses a malformed line, a sample
 * whose family has no `# TYPE`, a family typed twice, and a series given twice, so a broken exposition fails the
 * test instead of being read leniently.
 */
export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  /** Each family (the name in `# TYPE`) and its type. */
  families: Map<string, MetricType>;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const SUFFIXES: Record<MetricType, string[]> = {
  counter: [''],
  gauge: [''],
  untyped: [''],
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
};

export function parsePrometheusText(text: string): Exposition {
  const families = new Map<string, MetricType>();
  const samples: Sample[] = [];
  const seen = new Set<string>();
  /** Sample name -> its family, for the names the TYPE lines allow. */
  const allowed = new Map<string, string>();
  text.split('\n').forEach((line, i) => {
    const fail = (why: string): never => {
      throw new Error(`line ${i + 1}: ${why}: ${JSON.stringify(line)}`);
    };
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*)(?: (.*))?$/.exec(line);
      if (!m) {
        if (/^# (HELP|TYPE)/.test(line)) fail('malformed HELP or TYPE');
        return; // a comment
      }
      if (m[1] === 'TYPE') {
        const type = m[3] as MetricType;
        if (!(type in SUFFIXES)) fail(`unknown type ${m[3]}`);
        if (families.has(m[2])) fail(`family ${m[2]} typed twice`);
        families.set(m[2], type);
        for (const suffix of SUFFIXES[type]) allowed.set(m[2] + suffix, m[2]);
      }
      return;
    }
    const name = NAME.exec(line)?.[0] ?? fail('no metric name');
    let rest = line.slice(name.length);
    const labels: Record<string, string> = {};
    if (rest.startsWith('{')) {
      rest = rest.slice(1);
      while (!rest.startsWith('}')) {
        const label = LABEL.exec(rest)?.[0] ?? fail('bad label name');
        rest = rest.slice(label.length);
        if (!rest.startsWith('="')) fail('expected =" after a label name');
        rest = rest.slice(2);
        let value = '';
        for (;;) {
          if (rest === '') fail('unterminated label value');
          const c = rest[0];
          if (c === '"') break;
          if (c === '\\') {
            const e = rest[1];
            if (e === 'n') value += '\n';
            else if (e === '\\' || e === '"') value += e;
            else fail('bad escape in a label value');
            rest = rest.slice(2);
          } else {
            value += c;
            rest = rest.slice(1);
          }
        }
        rest = rest.slice(1);
        if (label in labels) fail(`label ${label} given twice`);
        labels[label] = value;
        if (rest.startsWith(',')) rest = rest.slice(1);
        else if (!rest.startsWith('}')) fail('expected , or } after a label');
      }
      rest = rest.slice(1);
    }
    const parts = rest.trim().split(/\s+/);
    if (!rest.startsWith(' ') || parts.length < 1 || parts.length > 2) fail('expected " value [timestamp]"');
    const value = parseValue(parts[0]) ?? fail('bad value');
    if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) fail('bad timestamp');
    if (!allowed.has(name)) fail(`sample of ${name} without a # TYPE of its family before it`);
    const key = `${name}{${Object.entries(labels)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(',')}}`;
    if (seen.has(key)) fail(`series ${key} given twice`);
    seen.add(key);
    samples.push({ name, labels, value });
  });
  return { families, samples };
}

/** A sample value as Prometheus reads it (Go's ParseFloat: Inf and NaN in any case; prom-client writes `Nan`). */
function parseValue(raw: string): number | undefined {
  if (/^\+?inf(inity)?$/i.test(raw)) return Infinity;
  if (/^-inf(inity)?$/i.test(raw)) return -Infinity;
  if (/^nan$/i.test(raw)) return NaN;
  return /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(raw) ? Number(raw) : undefined;
}

/** Every sample name an exposition's families allow (a histogram's _bucket, _sum and _count). */
export function seriesNamesOf(exposition: Exposition): Set<string> {
  const names = new Set<string>();
  for (const [family, type] of exposition.families) for (const suffix of SUFFIXES[type]) names.add(family + suffix);
  return names;
}

/** The one sample of `name` whose labels include `labels`; throws when there is none or more than one. */
export function sampleOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  const found = exposition.samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (found.length !== 1) throw new Error(`${found.length} samples of ${name}${JSON.stringify(labels)}`);
  return found[0].value;
}
