/**
 * A pod's volumes as the simulated kubelet provides them: emptyDir (a writable directory per pod),
 * and secret and configMap volumes (their keys, or the chosen `items`, written as files and mounted
 * read-only). Mounts honour subPath and readOnly. A secret or config map that does not exist (and is
 * not optional) leaves the container waiting in ContainerCreating, as a failed mount does.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { KubeObjects } from './objects.js';
import type { KubeObject } from './store.js';

interface KeyToPath {
  key: string;
  path: string;
  mode?: number;
}

interface PodVolume {
  name: string;
  emptyDir?: object;
  secret?: { secretName: string; items?: KeyToPath[]; optional?: boolean; defaultMode?: number };
  configMap?: { name: string; items?: KeyToPath[]; optional?: boolean; defaultMode?: number };
}

export interface VolumeMount {
  name: string;
  mountPath: string;
  subPath?: string;
  readOnly?: boolean;
}

export interface MountBind {
  source: string;
  target: string;
  readOnly: boolean;
}

/** A volume whose source is missing: the container cannot be created yet. */
export class VolumeNotReady extends Error {}

function volumesOf(pod: KubeObject): PodVolume[] {
  return (pod.spec as { volumes?: PodVolume[] } | undefined)?.volumes ?? [];
}

function sourceData(objects: KubeObjects, pod: KubeObject, volume: PodVolume): Record<string, Buffer> | undefined {
  const secret = volume.secret;
  const configMap = volume.configMap;
  const kind = secret ? 'secrets' : 'configmaps';
  const name = secret ? secret.secretName : configMap!.name;
  const object = objects.find(kind, pod.metadata.namespace, name);
  if (!object) {
    if ((secret ?? configMap)!.optional) return {};
    throw new VolumeNotReady(
      `MountVolume.SetUp failed for volume "${volume.name}" : ${secret ? 'secret' : 'configmap'} "${name}" not found`,
    );
  }
  const data: Record<string, Buffer> = {};
  const encoded = (object.data ?? {}) as Record<string, string>;
  for (const [key, value] of Object.entries(encoded)) data[key] = secret ? Buffer.from(value, 'base64') : Buffer.from(value);
  if (secret)
    for (const [key, value] of Object.entries((object.stringData ?? {}) as Record<string, string>)) data[key] = Buffer.from(value);
  if (configMap)
    for (const [key, value] of Object.entries((object.binaryData ?? {}) as Record<string, string>))
      data[key] = Buffer.from(value, 'base64');
  return data;
}

/** Creates or refreshes the pod's volume directories under `directory`; throws VolumeNotReady. */
export function prepareVolumes(objects: KubeObjects, pod: KubeObject, directory: string): void {
  for (const volume of volumesOf(pod)) {
    const target = path.join(directory, volume.name);
    if (volume.emptyDir) {
      mkdirSync(target, { recursive: true });
      continue;
    }
    if (!volume.secret && !volume.configMap) continue;
    const data = sourceData(objects, pod, volume)!;
    const source = (volume.secret ?? volume.configMap)!;
    const files: KeyToPath[] = source.items ?? Object.keys(data).map((key) => ({ key, path: key }));
    rmSync(target, { recursive: true, force: true });
    mkdirSync(target, { recursive: true });
    for (const item of files) {
      const content = data[item.key];
      if (content === undefined) {
        if (source.optional) continue;
        throw new VolumeNotReady(
          `MountVolume.SetUp failed for volume "${volume.name}" : configmap references non-existent config key: ${item.key}`,
        );
      }
      const file = path.join(target, item.path);
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, content, { mode: item.mode ?? source.defaultMode ?? 0o644 });
    }
  }
}

/** The binds of a container's volumeMounts; secret and configMap volumes are always read-only. */
export function mountsFor(pod: KubeObject, mounts: VolumeMount[], directory: string): MountBind[] {
  const volumes = new Map(volumesOf(pod).map((volume) => [volume.name, volume]));
  return mounts.flatMap((mount) => {
    const volume = volumes.get(mount.name);
    if (!volume || (!volume.emptyDir && !volume.secret && !volume.configMap)) return [];
    return [
      {
        source: path.join(directory, mount.name, mount.subPath ?? ''),
        target: mount.mountPath,
        readOnly: Boolean(mount.readOnly || volume.secret || volume.configMap),
      },
    ];
  });
}
