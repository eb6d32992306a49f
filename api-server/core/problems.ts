/**
 * The one registry of problem types (RFC 9457). A problem's `type` is `{base_url}/problems/{slug}`;
 * slugs not named by the spec are ours and are listed in docs/problems.md.
 */
export const PROBLEMS = {
  'validation-error': { title: 'Validation error' },
  unauthorized: { title: 'Unauthorized', slug: 'insufficient-scope' },
  'insufficient-scope': { title: 'Insufficient scope' },
  'tenant-suspended': { title: 'Tenant suspended' },
  'approval-signature-invalid': { title: 'Approval signature invalid' },
  'webhook-signature-invalid': { title: 'Webhook signature invalid' },
  'not-found': { title: 'Not found' },
  'method-not-allowed': { title: 'Method not allowed' },
  'name-conflict': { title: 'Name conflict' },
  'external-id-conflict': { title: 'External ID conflict' },
  'resource-in-use': { title: 'Resource in use' },
  'cross-tenant': { title: 'Cross-tenant reference' },
  'conversation-archived': { title: 'Conversation archived' },
  'conversation-busy': { title: 'Conversation busy' },
  'idempotency-key-conflict': { title: 'Idempotency key conflict' },
  'idempotency-key-in-use': { title: 'Idempotency key in use' },
  'approval-expired': { title: 'Approval expired' },
  'sync-in-progress': { title: 'Sync in progress' },
  'sync-superseded': { title: 'Sync attempt superseded' },
  'role-required': { title: 'Role required' },
  'missing-secret': { title: 'Missing secret' },
  'secret-hosts-required': { title: 'Secret hosts required' },
  'secret-destination-denied': { title: 'Secret destination denied' },
  'request-timeout': { title: 'Request timeout' },
  'payload-too-large': { title: 'Payload too large' },
  'unsupported-media-type': { title: 'Unsupported media type' },
  'request-header-too-large': { title: 'Request header fields too large' },
  'capacity-exhausted': { title: 'Capacity exhausted' },
  'rate-limited': { title: 'Rate limited' },
  'sandbox-unavailable': { title: 'Sandbox runtime unavailable' },
  'shutting-down': { title: 'Shutting down' },
  'turn-timeout': { title: 'Turn timed out' },
  'workspace-too-large': { title: 'Workspace too large' },
  'internal-error': { title: 'Internal server error' },
} as const satisfies Record<string, { title: string; slug?: string }>;

export type ProblemKind = keyof typeof PROBLEMS;

/** The slug that goes into `type` (the 401 envelope reuses `insufficient-scope`, as the spec says). */
export function problemSlug(kind: ProblemKind): string {
  const entry = PROBLEMS[kind];
  return 'slug' in entry ? entry.slug : kind;
}

export interface FieldError {
  /** JSON pointer (RFC 6901) to the offending field, e.g. `/settings/max_idle_ttl_seconds`. */
  pointer: string;
  message: string;
}

export interface ProblemOptions {
  detail?: string;
  conflictingResourceId?: string;
  errors?: FieldError[];
  headers?: Record<string, string>;
}

/** A typed error thrown where the problem is found and turned into a response once, at the boundary. */
export class ProblemError extends Error {
  readonly kind: ProblemKind;
  readonly status: number;
  readonly options: ProblemOptions;

  constructor(kind: ProblemKind, status: number, options: ProblemOptions = {}) {
    super(options.detail ?? PROBLEMS[kind].title);
    this.name = 'ProblemError';
    this.kind = kind;
    this.status = status;
    this.options = options;
  }
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  request_id?: string;
  conflicting_resource_id?: string;
  errors?: FieldError[];
}

export function problemBody(
  error: ProblemError,
  // No instance when the request could not be parsed far enough to know its path.
  context: { baseUrl: string; instance?: string; requestId: string },
): ProblemBody {
  const body: ProblemBody = {
    type: `${context.baseUrl}/problems/${problemSlug(error.kind)}`,
    title: PROBLEMS[error.kind].title,
    status: error.status,
  };
  if (error.options.detail) body.detail = error.options.detail;
  if (context.instance !== undefined) body.instance = context.instance;
  body.request_id = context.requestId;
  if (error.options.conflictingResourceId) body.conflicting_resource_id = error.options.conflictingResourceId;
  if (error.options.errors) body.errors = error.options.errors;
  return body;
}

// Constructors for the common cases keep call sites short and the status codes in one place.
export const problems = {
  notFound: (what = 'resource') => new ProblemError('not-found', 404, { detail: `No such ${what}.` }),
  unauthorized: (detail: string) => new ProblemError('unauthorized', 401, { detail, headers: { 'WWW-Authenticate': 'Bearer' } }),
  forbidden: (detail: string) => new ProblemError('insufficient-scope', 403, { detail }),
  badRequest: (errors: FieldError[], detail = 'The request parameters are invalid.') =>
    new ProblemError('validation-error', 400, { detail, errors }),
  invalid: (errors: FieldError[], detail = 'The request body is invalid.') => new ProblemError('validation-error', 422, { detail, errors }),
  nameConflict: (holderId: string, detail: string) => new ProblemError('name-conflict', 409, { detail, conflictingResourceId: holderId }),
  externalIdConflict: (holderId: string | undefined, detail: string) =>
    new ProblemError('external-id-conflict', 409, { detail, conflictingResourceId: holderId }),
  inUse: (dependentId: string, detail: string) => new ProblemError('resource-in-use', 409, { detail, conflictingResourceId: dependentId }),
};
