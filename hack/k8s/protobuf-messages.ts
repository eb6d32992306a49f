/**
 * The protobuf messages this server decodes, by field number, as k8s.io/api's and apimachinery's
 * generated.proto declare them (core/v1, authentication/v1, authorization/v1, meta/v1): the kinds
 * helm writes that way (Secret, ConfigMap) and those kubectl 1.35 sends that way (`kubectl create
 * namespace`, `create serviceaccount`, `create token`, `auth can-i`, `auth whoami`), and DeleteOptions.
 */

/** A field: its JSON name and type; a message field names the message. */
export interface FieldSpec {
  name: string;
  type: 'string' | 'int' | 'bool' | 'bytes' | 'map<string,string>' | 'map<string,bytes>' | Message;
  repeated?: boolean;
}

export type Message = Record<number, FieldSpec>;

const ownerReference: Message = {
  1: { name: 'kind', type: 'string' },
  3: { name: 'name', type: 'string' },
  4: { name: 'uid', type: 'string' },
  5: { name: 'apiVersion', type: 'string' },
  6: { name: 'controller', type: 'bool' },
  7: { name: 'blockOwnerDeletion', type: 'bool' },
};

const objectMeta: Message = {
  1: { name: 'name', type: 'string' },
  2: { name: 'generateName', type: 'string' },
  3: { name: 'namespace', type: 'string' },
  6: { name: 'resourceVersion', type: 'string' },
  11: { name: 'labels', type: 'map<string,string>' },
  12: { name: 'annotations', type: 'map<string,string>' },
  13: { name: 'ownerReferences', type: ownerReference, repeated: true },
  14: { name: 'finalizers', type: 'string', repeated: true },
};

const objectReference: Message = {
  1: { name: 'kind', type: 'string' },
  2: { name: 'namespace', type: 'string' },
  3: { name: 'name', type: 'string' },
  4: { name: 'uid', type: 'string' },
  5: { name: 'apiVersion', type: 'string' },
};

const resourceAttributes: Message = {
  1: { name: 'namespace', type: 'string' },
  2: { name: 'verb', type: 'string' },
  3: { name: 'group', type: 'string' },
  4: { name: 'version', type: 'string' },
  5: { name: 'resource', type: 'string' },
  6: { name: 'subresource', type: 'string' },
  7: { name: 'name', type: 'string' },
};

/** Each kind's message, its ObjectMeta at field 1 as in every top-level kind. */
export const KINDS: Record<string, Message> = {
  Secret: {
    1: { name: 'metadata', type: objectMeta },
    2: { name: 'data', type: 'map<string,bytes>' },
    3: { name: 'type', type: 'string' },
    4: { name: 'stringData', type: 'map<string,string>' },
    5: { name: 'immutable', type: 'bool' },
  },
  ConfigMap: {
    1: { name: 'metadata', type: objectMeta },
    2: { name: 'data', type: 'map<string,string>' },
    3: { name: 'binaryData', type: 'map<string,bytes>' },
    4: { name: 'immutable', type: 'bool' },
  },
  Namespace: {
    1: { name: 'metadata', type: objectMeta },
    2: { name: 'spec', type: { 1: { name: 'finalizers', type: 'string', repeated: true } } },
  },
  ServiceAccount: {
    1: { name: 'metadata', type: objectMeta },
    2: { name: 'secrets', type: objectReference, repeated: true },
    3: { name: 'imagePullSecrets', type: { 1: { name: 'name', type: 'string' } }, repeated: true },
    4: { name: 'automountServiceAccountToken', type: 'bool' },
  },
  TokenRequest: {
    1: { name: 'metadata', type: objectMeta },
    2: {
      name: 'spec',
      type: {
        1: { name: 'audiences', type: 'string', repeated: true },
        3: {
          name: 'boundObjectRef',
          type: {
            1: { name: 'kind', type: 'string' },
            2: { name: 'apiVersion', type: 'string' },
            3: { name: 'name', type: 'string' },
            4: { name: 'uid', type: 'string' },
          },
        },
        4: { name: 'expirationSeconds', type: 'int' },
      },
    },
  },
  SelfSubjectAccessReview: {
    1: { name: 'metadata', type: objectMeta },
    2: {
      name: 'spec',
      type: {
        1: { name: 'resourceAttributes', type: resourceAttributes },
        2: { name: 'nonResourceAttributes', type: { 1: { name: 'path', type: 'string' }, 2: { name: 'verb', type: 'string' } } },
      },
    },
  },
  SelfSubjectRulesReview: {
    1: { name: 'metadata', type: objectMeta },
    2: { name: 'spec', type: { 1: { name: 'namespace', type: 'string' } } },
  },
  SelfSubjectReview: {
    1: { name: 'metadata', type: objectMeta },
  },
};

export const DELETE_OPTIONS: Message = {
  1: { name: 'gracePeriodSeconds', type: 'int' },
  2: { name: 'preconditions', type: { 1: { name: 'uid', type: 'string' }, 2: { name: 'resourceVersion', type: 'string' } } },
  3: { name: 'orphanDependents', type: 'bool' },
  4: { name: 'propagationPolicy', type: 'string' },
  5: { name: 'dryRun', type: 'string', repeated: true },
};
