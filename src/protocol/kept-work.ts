// Kept work of a governed run (docs/worker.md, Branches and artifacts): what a mesh task's
// result says of the branch svcd kept, and the metadata of the mission artifact holding its
// diff. svcd writes them; the console and `svc task show` read them.
import { type Static, Type } from './type.js';

/** The branch a run worked on, measured against where it forked. */
export const KeptWork = Type.Object({
  branch: Type.String(),
  base_commit: Type.String(),
  head_commit: Type.String(),
  files_changed: Type.Integer({ minimum: 0 }),
  insertions: Type.Integer({ minimum: 0 }),
  deletions: Type.Integer({ minimum: 0 }),
});
export type KeptWork = Static<typeof KeptWork>;

/** The kept-work members of a task's result (with the run's own: summary, exit_code, …). */
export const KeptWorkResult = Type.Composite([
  KeptWork,
  Type.Object({
    /** The mission artifact with the diff; absent when it could not be stored. */
    diff_artifact_id: Type.Optional(Type.String()),
    diff_truncated: Type.Optional(Type.Boolean()),
  }),
]);
export type KeptWorkResult = Static<typeof KeptWorkResult>;

/** `metadata` of the diff artifact (content_type text/x-diff, size_bytes: the whole diff). */
export const DiffArtifactMetadata = Type.Composite([
  KeptWork,
  Type.Object({
    kind: Type.Literal('diff'),
    task_id: Type.String(),
    /** Cut at a line once over the cap (svcd's DIFF_CAP_BYTES). */
    truncated: Type.Boolean(),
    /** base_commit..head_commit as a unified diff. */
    diff: Type.String(),
  }),
]);
export type DiffArtifactMetadata = Static<typeof DiffArtifactMetadata>;
