/**
 * The agent runtime announces skills to the model incrementally within a session: a `skill_listing`
 * attachment in the transcript names the skills already announced, and on resume nothing already
 * named is announced again, while the old listing stays in the model's history. A run's skill set can
 * be narrower than an earlier run's, so a resumed session must not inherit earlier listings: loading a
 * transcript empties them (the entries stay, so the transcript's parent chain is intact), and the
 * runtime then announces exactly the set of the run that resumes it.
 */
type Entry = { type?: unknown; attachment?: { type?: unknown }; rendered?: unknown } & Record<string, unknown>;

export function forgetSkillListings(entries: unknown[]): unknown[] {
  return entries.map((entry) => {
    const candidate = entry as Entry | null;
    if (candidate?.type !== 'attachment' || candidate.attachment?.type !== 'skill_listing') return entry;
    const { rendered: _rendered, ...rest } = candidate;
    return { ...rest, attachment: { ...candidate.attachment, content: '', names: [], digests: [], skillCount: 0 } };
  });
}
