/**
 * Label and field selectors in the URL syntax the API server accepts:
 * labels `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, joined by commas;
 * fields `path=value`, `path==value`, `path!=value` on dotted paths of the object
 * (metadata.name, metadata.namespace, status.phase, spec.nodeName, involvedObject.uid, ...).
 * The real server allows only a few field paths per kind; this one allows any path.
 */
import { badRequest } from './errors.js';
import type { KubeObject } from './store.js';

type Requirement = { key: string; op: 'in' | 'notin'; values: string[] } | { key: string; op: 'exists' | '!exists' };

export type Selector = (object: KubeObject) => boolean;

/** Splits on commas that are not inside parentheses. */
function splitTerms(text: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const char of text) {
    if (char === '(') depth++;
    if (char === ')') depth--;
    if (char === ',' && depth === 0) {
      terms.push(current);
      current = '';
    } else current += char;
  }
  terms.push(current);
  return terms.map((term) => term.trim()).filter((term) => term.length > 0);
}

const LABEL_KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

function parseLabelTerm(term: string): Requirement {
  const setMatch = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
  if (setMatch) {
    const values = setMatch[3]!
      .split(',')
      .map((value) => value.trim())
      .filter((value) => value !== '');
    return { key: checkKey(setMatch[1]!), op: setMatch[2] as 'in' | 'notin', values: values.map(checkValue) };
  }
  const equality = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(term);
  if (equality) {
    const op = equality[2] === '!=' ? 'notin' : 'in';
    return { key: checkKey(equality[1]!), op, values: [checkValue(equality[3]!)] };
  }
  if (term.startsWith('!')) return { key: checkKey(term.slice(1).trim()), op: '!exists' };
  return { key: checkKey(term), op: 'exists' };
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function checkValue(value: string): string {
  if (!LABEL_VALUE.test(value) || value.length > 63) {
    throw badRequest(
      `unable to parse requirement: values[0]: Invalid value: "${value}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
    );
  }
  return value;
}

function checkKey(key: string): string {
  if (!LABEL_KEY.test(key)) throw badRequest(`unable to parse requirement: invalid label key "${key}"`);
  return key;
}

export function parseLabelSelector(text: string | null | undefined): Selector {
  if (!text) return () => true;
  const requirements = splitTerms(text).map(parseLabelTerm);
  return (object) => matchesLabels(object.metadata.labels ?? {}, requirements);
}

function matchesLabels(labels: Record<string, string>, requirements: Requirement[]): boolean {
  return requirements.every((requirement) => {
    const has = Object.hasOwn(labels, requirement.key);
    const value = labels[requirement.key];
    switch (requirement.op) {
      case 'exists':
        return has;
      case '!exists':
        return !has;
      case 'in':
        return has && requirement.values.includes(value!);
      default: // 'notin'
        return !has || !requirement.values.includes(value!);
    }
  });
}

/** A `matchLabels`/`matchExpressions` selector object (Deployments, PodDisruptionBudgets) in URL syntax. */
export function labelSelectorToString(selector: {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}): string {
  const terms = Object.entries(selector.matchLabels ?? {}).map(([key, value]) => `${key}=${value}`);
  for (const expression of selector.matchExpressions ?? []) {
    const values = (expression.values ?? []).join(',');
    if (expression.operator === 'In') terms.push(`${expression.key} in (${values})`);
    if (expression.operator === 'NotIn') terms.push(`${expression.key} notin (${values})`);
    if (expression.operator === 'Exists') terms.push(expression.key);
    if (expression.operator === 'DoesNotExist') terms.push(`!${expression.key}`);
  }
  return terms.join(',');
}

export function fieldValue(object: unknown, path: string): unknown {
  let current: unknown = object;
  for (const part of path.split('.')) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

export function parseFieldSelector(text: string | null | undefined): Selector {
  if (!text) return () => true;
  const terms = splitTerms(text).map((term) => {
    const match = /^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!match) throw badRequest(`invalid field selector: '${term}'`);
    return { path: match[1]!, negate: match[2] === '!=', value: match[3]! };
  });
  return (object) =>
    terms.every((term) => {
      const actual = fieldValue(object, term.path);
      const text = actual === undefined || actual === null ? '' : String(actual);
      return term.negate ? text !== term.value : text === term.value;
    });
}
