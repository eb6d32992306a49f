/**
 * The two images, checked without a Docker engine (none runs where ACIS is tested): the Dockerfiles
 * parsed for a pinned base, a non-root numeric USER matching what the chart and the controller
 * run as, exec-form entry points, sources that exist and that .dockerignore lets into the context;
 * the compiled entry points they start built by the same tsc invocation into a scratch directory;
 * the runner's entrypoint script checked by `sh -n` and run to see the trust bundle it writes.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/acis-process.js';
import { renderChart } from './chart-render.js';

const run = promisify(execFile);

interface Instruction {
  keyword: string;
  args: string;
}

/** Instructions of a Dockerfile: comments dropped, continuation lines joined. */
function parseDockerfile(text: string): Instruction[] {
  const logical = text
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ');
  return logical
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const [keyword, ...rest] = line.split(/\s+/);
      return { keyword: keyword!.toUpperCase(), args: rest.join(' ') };
    });
}

/** The instructions of the last stage (what the image is). */
function finalStage(instructions: Instruction[]): Instruction[] {
  const lastFrom = instructions.map((i) => i.keyword).lastIndexOf('FROM');
  return instructions.slice(lastFrom);
}

async function dockerignorePatterns(): Promise<string[]> {
  return (await readFile(path.join(ROOT, '.dockerignore'), 'utf8'))
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
}

const IMAGES = [
  { name: 'acis', file: 'images/acis/Dockerfile', uid: 1000, entry: 'dist/cli/acis.js' },
  { name: 'runner', file: 'images/runner/Dockerfile', uid: 10001, entry: 'dist/runner/runner.js' },
] as const;

describe.each(IMAGES)('images: $file', ({ file, uid }) => {
  it('builds on a base pinned to an exact Node release, never a floating tag', async () => {
    const instructions = parseDockerfile(await readFile(path.join(ROOT, file), 'utf8'));
    const base = instructions.find((i) => i.keyword === 'ARG' && i.args.startsWith('NODE_IMAGE='))!.args.split('=')[1]!;
    expect(base).toMatch(/^node:\d+\.\d+\.\d+-[a-z]+-slim(@sha256:[0-9a-f]{64})?$/);
    for (const from of instructions.filter((i) => i.keyword === 'FROM')) expect(from.args).toMatch(/^\$\{NODE_IMAGE\}/);
    expect(instructions.some((i) => i.keyword === 'ADD')).toBe(false);
  });

  it(`runs as the non-root uid ${uid}, with an exec-form entry point`, async () => {
    const image = finalStage(parseDockerfile(await readFile(path.join(ROOT, file), 'utf8')));
    const users = image.filter((i) => i.keyword === 'USER');
    expect(users.at(-1)!.args).toBe(`${uid}:${uid}`);
    // Nothing after USER may need root (a read-only root filesystem gets no writes either way).
    const afterUser = image.slice(image.indexOf(users.at(-1)!) + 1).map((i) => i.keyword);
    expect(afterUser.filter((keyword) => ['RUN', 'COPY', 'ADD'].includes(keyword))).toEqual([]);
    const entrypoint = image.find((i) => i.keyword === 'ENTRYPOINT')!;
    expect(() => JSON.parse(entrypoint.args)).not.toThrow();
  });

  it('copies only sources that exist and that .dockerignore lets into the build context', async () => {
    const instructions = parseDockerfile(await readFile(path.join(ROOT, file), 'utf8'));
    const ignored = await dockerignorePatterns();
    const sources = instructions
      .filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from'))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    expect(sources.length).toBeGreaterThan(3);
    for (const source of sources) {
      await expect(stat(path.join(ROOT, source)), source).resolves.toBeDefined();
      expect(
        ignored.some((pattern) => source === pattern || source.startsWith(`${pattern}/`) || source.startsWith(`./${pattern}`)),
        source,
      ).toBe(false);
    }
  });
});

describe('images: what they start', () => {
  it('compiles, with the build command the Dockerfiles run, every entry point the images and the chart name', {
    timeout: 180_000,
  }, async () => {
    const outDir = await mkdtemp(path.join(tmpdir(), 'acis-image-build-'));
    try {
      await run(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', outDir], {
        cwd: ROOT,
      });
      const objects = await renderChart();
      const egress = objects.find((object) => object.kind === 'Deployment' && object.metadata.name === 'acis-egress-proxy')!;
      const command = (egress.spec as { template: { spec: { containers: Array<{ command: string[] }> } } }).template.spec.containers[0]!
        .command;
      expect(command[0]).toBe('node');
      const entries = [...IMAGES.map((image) => image.entry), command[1]!.replace('/app/', '')];
      for (const entry of entries) await expect(stat(path.join(outDir, entry.replace(/^dist\//, ''))), entry).resolves.toBeDefined();
    } finally {
      await rm(outDir, { recursive: true, force: true });
    }
  });

  it('the runner image holds dist/runner only, so the runner imports nothing from outside runner/', async () => {
    const runnerImage = await readFile(path.join(ROOT, 'images/runner/Dockerfile'), 'utf8');
    expect(runnerImage).toContain('COPY --from=build /src/dist/runner ./dist/runner');
    for (const file of (await readdir(path.join(ROOT, 'runner'))).filter((name) => name.endsWith('.ts'))) {
      const source = await readFile(path.join(ROOT, 'runner', file), 'utf8');
      expect(source.match(/from '\.\.\/[^']*'/g) ?? [], file).toEqual([]);
    }
  });

  it('the runner entrypoint adds the egress CA to a trust bundle under TMPDIR and execs the runner', async () => {
    const script = path.join(ROOT, 'images/runner/entrypoint.sh');
    await run('sh', ['-n', script]);
    const scratch = await mkdtemp(path.join(tmpdir(), 'acis-entrypoint-'));
    try {
      // The script execs node with the runner; a stand-in `node` on PATH reports what it was given.
      await writeFile(
        path.join(scratch, 'node'),
        '#!/bin/sh\necho "args=$*"\necho "ssl=$SSL_CERT_FILE git=$GIT_SSL_CAINFO node=$NODE_EXTRA_CA_CERTS"\n',
      );
      await chmod(path.join(scratch, 'node'), 0o755);
      await writeFile(path.join(scratch, 'ca.crt'), '-----BEGIN CERTIFICATE-----\nEGRESS\n-----END CERTIFICATE-----\n');
      const env = {
        PATH: `${scratch}:${process.env.PATH}`,
        HOME: path.join(scratch, 'home'),
        TMPDIR: scratch,
        ACIS_EGRESS_CA_FILE: path.join(scratch, 'ca.crt'),
      };
      const { stdout } = await run('sh', [script, '--flag'], { env });
      expect(stdout).toContain('args=/app/dist/runner/runner.js --flag');
      const bundle = path.join(scratch, 'acis-ca-bundle.pem');
      expect(stdout).toContain(`ssl=${bundle} git=${bundle}`);
      expect(await readFile(bundle, 'utf8')).toContain('EGRESS');
      const without = await run('sh', [script], { env: { ...env, ACIS_EGRESS_CA_FILE: path.join(scratch, 'absent.crt') } });
      expect(without.stdout).toContain('ssl= git=');
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  });
});
