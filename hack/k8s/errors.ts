/**
 * Failures as the Kubernetes API server reports them: a `Status` object (kind Status, status
 * Failure) with the HTTP code, a machine reason and, for validation, causes naming each field.
 * Thrown at the source by the store and the operations, translated once by the HTTP layer.
 */

export interface StatusCause {
  reason: string;
  message: string;
  field: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export class KubeStatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details: StatusDetails = {},
  ) {
    super(message);
  }

  toStatus(): Record<string, unknown> {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      details: this.details,
      code: this.code,
    };
  }
}

/** How the server names a resource in messages: `pods`, `sandboxes.acis.dev`. */
export interface ResourceName {
  group: string;
  resource: string;
  kind: string;
}

function qualified(type: ResourceName): string {
  return type.group ? `${type.resource}.${type.group}` : type.resource;
}

export function notFound(type: ResourceName, name: string): KubeStatusError {
  return new KubeStatusError(404, 'NotFound', `${qualified(type)} "${name}" not found`, {
    name,
    group: type.group,
    kind: type.resource,
  });
}

export function alreadyExists(type: ResourceName, name: string): KubeStatusError {
  return new KubeStatusError(409, 'AlreadyExists', `${qualified(type)} "${name}" already exists`, {
    name,
    group: type.group,
    kind: type.resource,
  });
}

export function conflict(type: ResourceName, name: string): KubeStatusError {
  return new KubeStatusError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualified(type)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    { name, group: type.group, kind: type.resource },
  );
}

export function invalid(type: ResourceName, name: string, causes: StatusCause[]): KubeStatusError {
  const list = causes.map((cause) => `${cause.field}: ${cause.message}`).join(', ');
  const summary = causes.length === 1 ? list : `[${list}]`;
  return new KubeStatusError(422, 'Invalid', `${type.kind}${type.group ? `.${type.group}` : ''} "${name}" is invalid: ${summary}`, {
    name,
    group: type.group,
    kind: type.kind,
    causes,
  });
}

export function badRequest(message: string): KubeStatusError {
  return new KubeStatusError(400, 'BadRequest', message);
}

export function methodNotAllowed(message: string): KubeStatusError {
  return new KubeStatusError(405, 'MethodNotAllowed', message);
}

export function unsupportedMediaType(contentType: string): KubeStatusError {
  return new KubeStatusError(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got ${contentType})`,
  );
}

export function gone(message: string): KubeStatusError {
  return new KubeStatusError(410, 'Expired', message);
}
