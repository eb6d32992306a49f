import { defineRoute } from '../define-route.js';
import { mapPage } from '../core/pagination.js';
import { CreateCredentialBody, Credential, CredentialIdParams, CredentialList, ListCredentialsQuery } from './credentials.schemas.js';
import { createCredential, getCredentialInScope, listCredentials, presentCredential, removeCredential } from './credentials.service.js';

const tag = 'Credentials';
const common = {
  401: { description: 'Missing, unknown or revoked service key' },
  403: { description: 'Not a service key' },
};
const notFound = { 404: { description: 'No such credential in this integration' } };

export const credentialRoutes = [
  defineRoute({
    method: 'post',
    path: '/credentials',
    operationId: 'createCredential',
    summary: 'Register a credential; the secret is vaulted on arrival and never returned',
    tag,
    auth: 'service',
    body: CreateCredentialBody,
    bodyExample: { name: 'skills-repo-token', type: 'git_pat', secret: 'ghp_exampleexampleexample' },
    idempotent: true,
    responses: {
      201: { description: 'Created (without the secret)', schema: Credential },
      ...common,
      409: { description: 'Name taken (name-conflict)' },
      422: { description: 'Invalid body' },
    },
    handler: async ({ deps, principal, body }) => ({
      status: 201,
      body: presentCredential(await createCredential(deps, principal, body)),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/credentials',
    operationId: 'listCredentials',
    summary: 'List the credentials of the integration registry, newest first',
    tag,
    auth: 'service',
    query: ListCredentialsQuery,
    responses: {
      200: { description: 'A page of credentials', schema: CredentialList },
      400: { description: 'Bad query' },
      ...common,
    },
    handler: async ({ deps, principal, query }) => ({
      status: 200,
      body: mapPage(await listCredentials(deps, principal, query), presentCredential),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/credentials/:credential_id',
    operationId: 'getCredential',
    summary: 'Get a credential (never its secret)',
    tag,
    auth: 'service',
    params: CredentialIdParams,
    responses: { 200: { description: 'The credential', schema: Credential }, ...common, ...notFound },
    handler: async ({ deps, principal, params }) => ({
      status: 200,
      body: presentCredential(await getCredentialInScope(deps, principal, params.credential_id)),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/credentials/:credential_id',
    operationId: 'deleteCredential',
    summary: 'Delete a credential no repository uses',
    tag,
    auth: 'service',
    params: CredentialIdParams,
    responses: {
      204: { description: 'Deleted' },
      ...common,
      ...notFound,
      409: { description: 'A repository uses it (resource-in-use)' },
    },
    handler: async ({ deps, principal, params }) => {
      await removeCredential(deps, principal, params.credential_id);
      return { status: 204 };
    },
  }),
];
