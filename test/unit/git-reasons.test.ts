import { describe, expect, it } from 'vitest';
import { explainFailure, scrub } from '../../api-server/repositories/git.js';

describe('explainFailure(stderr)', () => {
  it.each([
    ["fatal: could not read Username for 'https://h': terminal prompts disabled", /^authentication required/],
    ["remote: Invalid username or password.\nfatal: Authentication failed for 'https://h/x.git/'", /^authentication failed/],
    ['git@h: Permission denied (publickey).\nfatal: Could not read from remote repository.', /^authentication failed/],
    ["fatal: couldn't find remote ref refs/heads/nope", /^branch not found/],
    ["fatal: unable to access 'https://h/x.git/': Could not resolve host: h", /^host unreachable/],
    ["fatal: unable to access 'http://127.0.0.1:9/x.git/': Failed to connect to 127.0.0.1 port 9: Connection refused", /^host unreachable/],
    ['ssh: connect to host 127.0.0.1 port 1: Connection refused', /^host unreachable/],
    [
      '@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\nHost key verification failed.\nfatal: Could not read from remote repository.',
      /^host key changed: /,
    ],
    [
      'No ED25519 host key is known for [h]:22 and you have requested strict checking.\nHost key verification failed.',
      /^host key changed: /,
    ],
    ["remote: Repository not found.\nfatal: repository 'https://h/x.git/' not found", /^repository not found/],
    ["fatal: '/srv/x' does not appear to be a git repository", /^repository not found/],
    ['fatal: something new', /^git failed: fatal: something new$/],
  ])('%s', (stderr, reason) => {
    expect(explainFailure(stderr)).toMatch(reason);
  });
});

describe('scrub(text, secrets)', () => {
  it('replaces every secret and any credentials embedded in a URL', () => {
    expect(scrub('token ghp_abc in https://user:pw@host/x and ghp_abc again', ['ghp_abc'])).toBe(
      'token [redacted] in https://[redacted]@host/x and [redacted] again',
    );
  });
});
