/**
 * A parser of the Prometheus text exposition format (version 0.0.4), enough to check what a
 * `/metrics` endpoint serves: HELP and TYPE comments, samples with escaped label values, special
 * values (NaN, +Inf, -Inf, in any case) and optional timestamps. Anything else is an error, so a malformed
 * exposition fails the test that reads it.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type?: string;
  help?: string;
}

export interface Exposition {
  families: Map<string, Family>;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export function parsePrometheusText(text: string): Exposition {
  const families = new Map<string, Family>();
  const samples: Sample[] = [];
  const family = (name: string) => {
    let found = families.get(name);
    if (!found) {
      found = { name };
      families.set(name, found);
    }
    return found;
  };
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    const fail = (why: string): never => {
      throw new Error(`line ${index + 1}: ${why}: ${raw}`);
    };
    if (line === '') return;
    if (line.startsWith('#')) {
      const comment = /^#\s+(HELP|TYPE)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\s+(.*))?$/.exec(line);
      if (!comment) return; // other comments carry nothing
      const [, kind, name, rest = ''] = comment;
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) fail(`unknown type ${rest}`);
        family(name!).type = rest;
      } else {
        family(name!).help = rest.replace(/\\(n|\\)/g, (_m, c: string) => (c === 'n' ? '\n' : '\\'));
      }
      return;
    }
    const name = NAME.exec(line)?.[0] ?? fail('no metric name');
    let rest = line.slice(name.length);
    const labels: Record<string, string> = {};
    if (rest.startsWith('{')) {
      rest = rest.slice(1);
      for (;;) {
        rest = rest.trimStart();
        if (rest.startsWith('}')) {
          rest = rest.slice(1);
          break;
        }
        const labelName = LABEL_NAME.exec(rest)?.[0] ?? fail('bad label name');
        rest = rest.slice(labelName.length);
        if (!rest.startsWith('="')) fail(`label ${labelName} has no quoted value`);
        rest = rest.slice(2);
        let value = '';
        for (;;) {
          const char = rest[0] ?? fail('unterminated label value');
          rest = rest.slice(1);
          if (char === '"') break;
          if (char !== '\\') {
            value += char;
            continue;
          }
          const escaped = rest[0] ?? fail('dangling escape');
          rest = rest.slice(1);
          if (escaped === 'n') value += '\n';
          else if (escaped === '\\' || escaped === '"') value += escaped;
          else fail(`bad escape \\${escaped}`);
        }
        if (labelName in labels) fail(`label ${labelName} given twice`);
        labels[labelName] = value;
        rest = rest.trimStart();
        if (rest.startsWith(',')) rest = rest.slice(1);
        else if (!rest.startsWith('}')) fail('expected , or }');
      }
    }
    const fields = rest.trim().split(/\s+/);
    if (fields.length < 1 || fields.length > 2 || fields[0] === '') fail('expected a value and an optional timestamp');
    if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) fail('bad timestamp');
    samples.push({ name, labels, value: parseValue(fields[0]!) ?? fail(`bad value ${fields[0]}`) });
  });
  return { families, samples };
}

/** As Prometheus reads them (Go's ParseFloat): NaN and Inf in any case; prom-client writes `Nan`. */
function parseValue(text: string): number | undefined {
  const word = text.toLowerCase();
  if (word === 'nan') return Number.NaN;
  if (word === '+inf' || word === 'inf') return Number.POSITIVE_INFINITY;
  if (word === '-inf') return Number.NEGATIVE_INFINITY;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) return undefined;
  return Number(text);
}

/** The samples named `name` whose labels include every one of `labels`. */
export function samplesOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): Sample[] {
  return exposition.samples.filter(
    (sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
}

/** The sum of those samples' values (0 when there are none: a counter never incremented). */
export function sumOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  return samplesOf(exposition, name, labels).reduce((sum, sample) => sum + sample.value, 0);
}
