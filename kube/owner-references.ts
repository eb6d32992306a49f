/**
 * Ownership as Kubernetes records it: an object is controlled by the owner whose reference has
 * `controller: true`, matched by UID (a name can be reused by a new object; a UID cannot).
 */
import type { V1OwnerReference } from '@kubernetes/client-node';

export function isControlledBy(object: { metadata?: { ownerReferences?: V1OwnerReference[] } }, uid: string | undefined): boolean {
  return uid !== undefined && (object.metadata?.ownerReferences?.some((ref) => ref.controller && ref.uid === uid) ?? false);
}
