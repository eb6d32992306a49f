import type { z } from 'zod';
import type { FieldError } from '../problems.js';

/** RFC 6901 JSON pointer of a zod issue path. */
export function toPointer(path: readonly PropertyKey[]): string {
  return path.map((segment) => `/${String(segment).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

export function fieldErrors(error: z.ZodError, prefix: readonly PropertyKey[] = []): FieldError[] {
  return issueErrors(error.issues, prefix);
}

function issueErrors(issues: readonly z.core.$ZodIssue[], prefix: readonly PropertyKey[]): FieldError[] {
  return issues.flatMap((issue) => {
    const path = [...prefix, ...issue.path];
    if (issue.code === 'unrecognized_keys') {
      return [{ pointer: toPointer([...path, issue.keys[0] ?? '']), message: issue.message }];
    }
    // A union whose input has the type of exactly one alternative (an object where a string or an
    // object may stand): that alternative's own errors point at the field that is wrong.
    if (issue.code === 'invalid_union') {
      const matched = issue.errors.filter(
        (branch) => !(branch.length === 1 && branch[0]!.path.length === 0 && branch[0]!.code === 'invalid_type'),
      );
      if (matched.length === 1) return issueErrors(matched[0]!, path);
    }
    return [{ pointer: toPointer(path), message: issue.message }];
  });
}

/**
 * Why a text cannot be kept exactly as sent, or undefined when it can. PostgreSQL text cannot hold
 * NUL, and a lone surrogate has no UTF-8 form: the driver would store U+FFFD in its place, so two
 * different values (`a\ud800`, `a\ud801`) would become one.
 */
export function textFault(text: string): string | undefined {
  if (text.includes('\u0000')) return 'must not contain NUL (U+0000)';
  if (LONE_SURROGATE.test(text)) return 'must be well-formed Unicode (it holds a lone surrogate)';
  return undefined;
}

// With the u flag a surrogate pair is one code point, so only unpaired surrogates match.
const LONE_SURROGATE = /\p{Cs}/u;
const MAX_INPUT_ERRORS = 20;
/**
 * Far deeper than any request shape (message parts carry free-form JSON); deeper input would only
 * cost stack in recursive code such as the idempotency fingerprint.
 */
export const MAX_INPUT_DEPTH = 64;

interface Visit {
  value: unknown;
  depth: number;
  key?: PropertyKey;
  parent?: Visit;
}

/**
 * Every string and object key in a parsed input (path parameters, query, JSON body) that cannot be
 * kept as sent, and any value nested deeper than MAX_INPUT_DEPTH, as field errors. Iterative, and
 * paths are built only for faults, so a deeply nested body costs linear time and no stack.
 */
export function unsafeInput(input: unknown): FieldError[] {
  const errors: FieldError[] = [];
  const stack: Visit[] = [{ value: input, depth: 0 }];
  const pointerOf = (visit: Visit): string => {
    const path: PropertyKey[] = [];
    for (let at: Visit | undefined = visit; at?.key !== undefined; at = at.parent) path.push(at.key);
    return toPointer(path.reverse());
  };
  while (stack.length > 0 && errors.length < MAX_INPUT_ERRORS) {
    const visit = stack.pop()!;
    const { value, depth } = visit;
    if (depth > MAX_INPUT_DEPTH && value !== null && typeof value === 'object') {
      errors.push({ pointer: pointerOf(visit), message: `nests deeper than ${MAX_INPUT_DEPTH} levels` });
    } else if (typeof value === 'string') {
      const fault = textFault(value);
      if (fault) errors.push({ pointer: pointerOf(visit), message: fault });
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], depth: depth + 1, key: i, parent: visit });
    } else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value).reverse()) {
        const child: Visit = { value: item, depth: depth + 1, key, parent: visit };
        const fault = textFault(key);
        if (fault) errors.push({ pointer: pointerOf(child), message: `key ${fault}` });
        stack.push(child);
      }
    }
  }
  return errors;
}
