import type { z } from 'zod';
import type { FieldError } from '../problems.js';

/** RFC 6901 JSON pointer of a zod issue path. */
export function toPointer(path: readonly PropertyKey[]): string {
  return path.map((segment) => `/${String(segment).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

export function fieldErrors(error: z.ZodError, prefix: readonly PropertyKey[] = []): FieldError[] {
  return error.issues.map((issue) => {
    const path = [...prefix, ...issue.path];
    if (issue.code === 'unrecognized_keys') {
      return { pointer: toPointer([...path, issue.keys[0] ?? '']), message: issue.message };
    }
    return { pointer: toPointer(path), message: issue.message };
  });
}
