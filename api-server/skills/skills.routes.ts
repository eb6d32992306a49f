import { defineRoute } from '../define-route.js';
import { mapPage } from '../core/pagination.js';
import { CreateSkillBody, ListSkillsQuery, RepositorySkillsParams, Skill, SkillList } from './skills.schemas.js';
import { createManualSkill, listSkills, presentSkill } from './skills.service.js';

const tag = 'Skills';
const common = {
  401: { description: 'Missing, unknown or revoked service key' },
  403: { description: 'Not a service key' },
};
const notFound = { 404: { description: 'No such repository in this integration' } };

export const skillRoutes = [
  defineRoute({
    method: 'post',
    path: '/repositories/:repository_id/skills',
    operationId: 'createSkill',
    summary: 'Register a manual skill in a repository (it survives re-syncs)',
    tag,
    auth: 'service',
    params: RepositorySkillsParams,
    body: CreateSkillBody,
    bodyExample: { name: 'release-notes', description: 'Writes release notes from a changelog', path: 'skills/release-notes' },
    idempotent: true,
    responses: {
      201: { description: 'Created, with source manual', schema: Skill },
      ...common,
      ...notFound,
      409: { description: 'Name taken in this repository (name-conflict)' },
      422: { description: 'Invalid body' },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 201,
      body: presentSkill(await createManualSkill(deps, principal, params.repository_id, body)),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/repositories/:repository_id/skills',
    operationId: 'listSkills',
    summary: 'List the skills of a repository, newest first',
    tag,
    auth: 'service',
    params: RepositorySkillsParams,
    query: ListSkillsQuery,
    responses: {
      200: { description: 'A page of skills', schema: SkillList },
      400: { description: 'Bad query' },
      ...common,
      ...notFound,
    },
    handler: async ({ deps, principal, params, query }) => ({
      status: 200,
      body: mapPage(await listSkills(deps, principal, params.repository_id, query), presentSkill),
    }),
  }),
];
