/**
 * A structured label selector (metav1.LabelSelector: matchLabels and matchExpressions, ANDed) as
 * NetworkPolicies and Services' controllers evaluate it
 * (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#resources-that-support-set-based-requirements).
 * An empty selector selects everything.
 */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }>;
}

export function selectsLabels(selector: LabelSelector, labels: Record<string, string>): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) if (labels[key] !== value) return false;
  return (selector.matchExpressions ?? []).every((expression) => {
    const has = expression.key in labels;
    const listed = has && (expression.values ?? []).includes(labels[expression.key]!);
    switch (expression.operator) {
      case 'Exists':
        return has;
      case 'DoesNotExist':
        return !has;
      case 'In':
        return listed;
      default:
        return !listed;
    }
  });
}
