import { z } from 'zod';

/** Shared sub-shapes and limits of the spec ("Limits" table), each defined once. */

export const MAX_NAME_LENGTH = 255;
export const MAX_METADATA_KEYS = 50;
export const MAX_METADATA_VALUE_LENGTH = 500;
export const MAX_METADATA_KEY_LENGTH = 255;

/** External ids are compared byte-exact after trimming, and limited after trimming. */
export const ExternalId = z.string().trim().min(1).max(MAX_NAME_LENGTH);

/** A required name (tenant, role, repository, credential): trimmed, 1..255. */
export const Name = z.string().trim().min(1).max(MAX_NAME_LENGTH);

export const Metadata = z
  .record(z.string().min(1).max(MAX_METADATA_KEY_LENGTH), z.string().max(MAX_METADATA_VALUE_LENGTH))
  .refine((value) => Object.keys(value).length <= MAX_METADATA_KEYS, {
    message: `at most ${MAX_METADATA_KEYS} keys`,
  })
  .meta({ id: 'Metadata', description: 'String keys to string values; at most 50 keys, values at most 500 characters.' });

export const Timestamp = z.iso.datetime();

export const Storage = z
  .object({
    provider: z.enum(['platform', 'external']),
    bucket_uri: z.string(),
  })
  .meta({ id: 'Storage' });

export const SkillName = z
  .string()
  .max(128)
  .regex(/^[a-z0-9][a-z0-9-]*$/, 'must match ^[a-z0-9][a-z0-9-]*$');

/** S3-style bucket URI (`s3://bucket/optional/prefix/`). */
export const BucketUri = z
  .string()
  .max(1024)
  .regex(/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/[^\s]*)?$/, 'must be an s3:// bucket URI');

/**
 * Route parameter holding a resource id; a malformed id simply finds nothing (404). Text no id can
 * hold (NUL, a lone surrogate, bad percent-encoding) is refused before this, as in every input (400).
 */
export const IdParam = z.string().max(100);

/**
 * An integer from a query string, in decimal digits only. `z.coerce.number()` alone reads what
 * `Number()` reads (`0x10` as 16, `1e1` as 10, ` 16` and the empty string as numbers): a caller's
 * typo would then be answered as if it meant something.
 */
export function QueryInteger<T extends z.ZodType<number>>(schema: T) {
  return z.preprocess((value, context) => {
    if (typeof value !== 'string' || /^[0-9]{1,10}$/.test(value)) return value;
    context.addIssue({ code: 'custom', message: 'must be a decimal integer', input: value });
    return z.NEVER;
  }, schema);
}

/** List envelope of the spec. */
export function ListOf<T extends z.ZodType>(item: T) {
  return z.object({
    object: z.literal('list'),
    data: z.array(item),
    has_more: z.boolean(),
    next_cursor: z.string().nullable(),
  });
}
