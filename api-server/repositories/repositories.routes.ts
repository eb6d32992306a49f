import { defineRoute } from '../define-route.js';
import { mapPage } from '../core/pagination.js';
import {
  CreateRepositoryBody,
  ListRepositoriesQuery,
  PatchRepositoryBody,
  Repository,
  RepositoryIdParams,
  RepositoryList,
  RepositorySyncDetails,
} from './repositories.schemas.js';
import {
  createRepository,
  getRepositoryInScope,
  listRepositories,
  patchRepository,
  presentRepository,
  presentSyncDetails,
  removeRepository,
  syncRepository,
} from './repositories.service.js';

const tag = 'Repositories';
const common = {
  401: { description: 'Missing, unknown or revoked service key' },
  403: { description: 'Not a service key' },
};
const notFound = { 404: { description: 'No such repository in this integration' } };

export const repositoryRoutes = [
  defineRoute({
    method: 'post',
    path: '/repositories',
    operationId: 'createRepository',
    summary: 'Register a git repository in the integration registry',
    tag,
    auth: 'service',
    body: CreateRepositoryBody,
    bodyExample: {
      name: 'skills',
      repo_url: 'https://github.com/acme/skills.git',
      branch: 'main',
      provider: 'github',
      credential_id: 'crd_01JD4Z8K5M2N3P4Q5R6S7T8V9W',
    },
    idempotent: true,
    responses: {
      201: { description: 'Registered; its first sync starts at once (state pending, then syncing)', schema: Repository },
      ...common,
      409: { description: 'Name taken (name-conflict)' },
      422: { description: 'Invalid body, refused URL or unknown credential' },
    },
    handler: async ({ deps, principal, body }) => ({
      status: 201,
      body: presentRepository(await createRepository(deps, principal, body)),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/repositories',
    operationId: 'listRepositories',
    summary: 'List the repositories of the integration registry, newest first',
    tag,
    auth: 'service',
    query: ListRepositoriesQuery,
    responses: {
      200: { description: 'A page of repositories', schema: RepositoryList },
      400: { description: 'Bad query' },
      ...common,
    },
    handler: async ({ deps, principal, query }) => ({
      status: 200,
      body: mapPage(await listRepositories(deps, principal, query), presentRepository),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/repositories/:repository_id',
    operationId: 'getRepository',
    summary: 'Get a repository with its sync state and skill count',
    tag,
    auth: 'service',
    params: RepositoryIdParams,
    responses: { 200: { description: 'The repository', schema: Repository }, ...common, ...notFound },
    handler: async ({ deps, principal, params }) => ({
      status: 200,
      body: presentRepository(await getRepositoryInScope(deps, principal, params.repository_id)),
    }),
  }),
  defineRoute({
    method: 'patch',
    path: '/repositories/:repository_id',
    operationId: 'updateRepository',
    summary: 'Update a repository: name, branch, credential, metadata (a new branch or credential resets sync to pending)',
    tag,
    auth: 'service',
    params: RepositoryIdParams,
    body: PatchRepositoryBody,
    bodyExample: { branch: 'release' },
    responses: {
      200: { description: 'The updated repository', schema: Repository },
      ...common,
      ...notFound,
      409: { description: 'Name taken (name-conflict)' },
      422: { description: 'Invalid body or unknown credential' },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: presentRepository(await patchRepository(deps, principal, params.repository_id, body)),
    }),
  }),
  defineRoute({
    method: 'post',
    path: '/repositories/:repository_id/sync',
    operationId: 'syncRepository',
    summary: 'Start a fresh git read that reconciles the skill catalog',
    tag,
    auth: 'service',
    params: RepositoryIdParams,
    idempotent: true,
    responses: {
      202: { description: 'Sync started; state syncing', schema: Repository },
      ...common,
      ...notFound,
      409: { description: 'A sync is already in flight (sync-in-progress)' },
    },
    handler: async ({ deps, principal, params }) => ({
      status: 202,
      body: presentRepository(await syncRepository(deps, principal, params.repository_id)),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/repositories/:repository_id/sync',
    operationId: 'getRepositorySync',
    summary: 'Sync details: state, synced commit and what the last scan skipped (invalid manifests, conflicts)',
    tag,
    auth: 'service',
    params: RepositoryIdParams,
    responses: { 200: { description: 'The sync details', schema: RepositorySyncDetails }, ...common, ...notFound },
    handler: async ({ deps, principal, params }) => ({
      status: 200,
      body: presentSyncDetails(await getRepositoryInScope(deps, principal, params.repository_id)),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/repositories/:repository_id',
    operationId: 'deleteRepository',
    summary: 'Delete a repository and its skills, unless a tenant has it attached or a role pins it',
    tag,
    auth: 'service',
    params: RepositoryIdParams,
    responses: {
      204: { description: 'Deleted' },
      ...common,
      ...notFound,
      409: { description: 'Attached to a tenant or pinned by a role (resource-in-use)' },
    },
    handler: async ({ deps, principal, params }) => {
      await removeRepository(deps, principal, params.repository_id);
      return { status: 204 };
    },
  }),
];
