/**
 * GitHub App credentials for repository syncs. A `github_app` credential's secret is a JSON object
 * `{app_id, installation_id, private_key}`; a sync exchanges it for an installation access token
 * (valid about an hour) through GitHub's REST API and hands git that token, never the key. The token
 * lives only in the sync's memory and git's environment: it is neither stored nor logged.
 *
 * Least privilege: the token is minted for the one repository being synced (`repositories: [name]`)
 * with `permissions: {contents: read}`, whatever else the installation may reach, so a token that
 * leaks from a sync (a hostile remote, a git exploit in a sync pod) reads that repository and nothing
 * more. The repository is named rather than given by `repository_ids`: its id would take a call with
 * a broader token first, and GitHub resolves the name within the installation's account, so a URL
 * naming another owner's repository of the same name gets no more than the installation's own.
 */
import { createAppAuth } from '@octokit/auth-app';
import { request } from '@octokit/request';
import { z } from 'zod';
import { GitError } from './git.js';

export const GITHUB_APP_CREDENTIAL = 'github_app';

const Id = z.union([z.number().int().positive(), z.string().regex(/^[1-9][0-9]{0,19}$/)]).transform(String);
export const GitHubAppSecret = z.object({
  app_id: Id,
  installation_id: Id,
  private_key: z.string().includes('PRIVATE KEY-----', { message: 'must be a PEM private key' }),
});
export type GitHubAppSecret = z.output<typeof GitHubAppSecret>;

/** The secret's fields, or what is wrong with them (never the secret itself). */
export function parseGitHubAppSecret(secret: string): { ok: true; value: GitHubAppSecret } | { ok: false; problems: string[] } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(secret);
  } catch {
    return { ok: false, problems: ['must be a JSON object {app_id, installation_id, private_key}'] };
  }
  const result = GitHubAppSecret.safeParse(parsed);
  if (result.success) return { ok: true, value: result.data };
  return { ok: false, problems: result.error.issues.map((issue) => `${issue.path.join('.') || 'secret'}: ${issue.message}`) };
}

/** An installation access token for the App's installation, minted now. Failures are sync reasons. */
export async function mintInstallationToken(
  secret: string,
  options: { apiUrl: string; repoUrl: string; signal?: AbortSignal | undefined },
): Promise<string> {
  const repository = repositoryName(options.repoUrl);
  if (!repository) throw new GitError('a github_app credential needs a repository URL that ends in the repository name');
  const parsed = parseGitHubAppSecret(secret);
  if (!parsed.ok) throw new GitError(`the github_app credential is malformed (${parsed.problems.join('; ')})`);
  const auth = createAppAuth({
    appId: parsed.value.app_id,
    privateKey: parsed.value.private_key,
    installationId: parsed.value.installation_id,
    request: request.defaults({ baseUrl: options.apiUrl, request: { signal: options.signal } }),
  });
  try {
    const { token } = await auth({ type: 'installation', repositoryNames: [repository], permissions: { contents: 'read' } });
    return token;
  } catch (error) {
    throw new GitError(explainTokenFailure(error));
  }
}

/** The repository's name as GitHub knows it: the URL's last path segment, without `.git`. */
export function repositoryName(repoUrl: string): string | undefined {
  const path = repoUrl.includes('://') ? new URL(repoUrl).pathname : repoUrl.slice(repoUrl.indexOf(':') + 1);
  const name = path
    .replace(/\/+$/, '')
    .split('/')
    .pop()
    ?.replace(/\.git$/, '');
  return name && /^[A-Za-z0-9._-]+$/.test(name) ? name : undefined;
}

function explainTokenFailure(error: unknown): string {
  const status = (error as { status?: unknown }).status;
  if (status === 401) return 'GitHub App authentication failed (the App id or private key was refused)';
  if (status === 404) return 'GitHub App installation not found (check the installation id and that the App is installed)';
  if (status === 403) return 'GitHub App not permitted to create an installation token';
  if (status === 422) return 'GitHub App installation cannot read this repository (is the App installed on it, with contents read?)';
  if (typeof status === 'number') return `GitHub App token request failed with HTTP ${status}`;
  if (error instanceof Error && /private key|PEM|asn1|DECODER/i.test(error.message)) return 'the github_app private key cannot be read';
  return 'GitHub API unreachable';
}
