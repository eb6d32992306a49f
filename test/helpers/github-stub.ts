/**
 * A stand-in for the GitHub REST endpoint a sync calls: `POST /app/installations/{id}/access_tokens`,
 * as GitHub documents it. The caller authenticates with an App JWT (RS256, `iss` = the App id,
 * `exp` at most 10 minutes ahead) signed with the App's private key; the answer is 201
 * `{token, expires_at, permissions, repository_selection}`, 401 for a JWT that does not verify, 404
 * for an installation the App does not have. Requests are recorded with their JSON body (without the
 * JWT), so a test can check what a token was asked for: which repositories, which permissions.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { KeyObject } from 'node:crypto';
import { jwtVerify } from 'jose';

export interface GitHubStubOptions {
  appId: string;
  /** The App's public key (its private half signs the JWTs). */
  publicKey: KeyObject;
  /** Installation id → the token it issues (fixed, so a git server can require exactly it). */
  installations: Record<string, string>;
}

export interface GitHubStub {
  url: string;
  requests: Array<{ method: string; path: string; status: number; body?: unknown }>;
  stop(): Promise<void>;
}

export async function startGitHubStub(options: GitHubStubOptions): Promise<GitHubStub> {
  const requests: GitHubStub['requests'] = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      const path = new URL(req.url ?? '/', 'http://stub').pathname;
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      const answer = (status: number, body: unknown) => {
        requests.push({ method: req.method ?? 'GET', path, status, ...(text && { body: JSON.parse(text) as unknown }) });
        res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
        res.end(JSON.stringify(body));
      };
      const match = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(path);
      if (req.method !== 'POST' || !match) return answer(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
      const jwt = /^bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
      const verified = jwt
        ? await jwtVerify(jwt, options.publicKey, { algorithms: ['RS256'], issuer: options.appId }).catch(() => undefined)
        : undefined;
      const { iat, exp } = verified?.payload ?? {};
      if (!verified || typeof iat !== 'number' || typeof exp !== 'number' || exp > Date.now() / 1000 + 600) {
        return answer(401, { message: 'A JSON web token could not be decoded', documentation_url: 'https://docs.github.com/rest' });
      }
      const token = options.installations[match[1]!];
      if (!token) return answer(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
      return answer(201, {
        token,
        expires_at: new Date(Date.now() + 3600_000).toISOString(),
        permissions: { contents: 'read', metadata: 'read' },
        repository_selection: 'all',
      });
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
