// The task page's Changes: the work a run kept (docs/worker.md, Branches and artifacts) — its
// branch, base and head commits, diffstat — and the diff from the mission artifact the result
// links, added and removed lines coloured, marked when svcd cut it at its cap.
import { useEffect, useState } from 'preact/hooks';
import type { DiffArtifactMetadata, KeptWorkResult } from '../../../src/protocol/kept-work.js';
import type { Artifact } from '../../../src/protocol/records.js';
import { api, errorText } from '../api.js';
import { diffLines } from '../diff.js';
import { bytes } from '../format.js';
import { Card, CopyButton } from '../ui.js';
import type { TaskSectionProps } from './task.js';

/** The kept-work members of a result, when it has them. */
export function keptWork(result: unknown): KeptWorkResult | null {
  const r = result as Partial<KeptWorkResult> | null;
  return r !== null && typeof r === 'object' && typeof r.branch === 'string' ? (r as KeptWorkResult) : null;
}

export function ChangesSection(p: TaskSectionProps) {
  const k = keptWork(p.task.result);
  const artifactId = k?.diff_artifact_id;
  const { domain_id: d, mission_id: m } = p.task;
  const [artifact, setArtifact] = useState<Artifact | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    setArtifact(null);
    if (!artifactId) return;
    let live = true;
    const path = `/domains/${encodeURIComponent(d)}/m/${encodeURIComponent(m)}/artifacts/${encodeURIComponent(artifactId)}`;
    api<Artifact>('GET', path).then(
      (a) => live && setArtifact(a),
      (e: unknown) => live && setError(errorText(e)),
    );
    return () => {
      live = false;
    };
  }, [artifactId, d, m]);
  if (!k) return null;
  const meta = artifact?.metadata as Partial<DiffArtifactMetadata> | undefined;
  const diff = typeof meta?.diff === 'string' ? meta.diff : null;
  const truncated = meta?.truncated ?? k.diff_truncated ?? false;
  return (
    <Card title="Changes" testid="task-changes">
      <dl class="facts">
        <dt>branch</dt>
        <dd class="mono">
          {k.branch} <CopyButton text={k.branch} label="Copy branch name" />
        </dd>
        <dt>commits</dt>
        <dd class="mono">
          <span title={k.base_commit}>{k.base_commit.slice(0, 12)}</span> ..{' '}
          <span title={k.head_commit}>{k.head_commit.slice(0, 12)}</span>
        </dd>
        <dt>changed</dt>
        <dd data-testid="diffstat">
          {k.files_changed} file{k.files_changed === 1 ? '' : 's'} <span class="ok">+{k.insertions}</span>{' '}
          <span class="error">−{k.deletions}</span>
        </dd>
      </dl>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {!artifactId && <p class="muted">No diff was stored for this run.</p>}
      {truncated && (
        <p class="warn" data-testid="diff-truncated">
          Truncated: the diff is{' '}
          {typeof artifact?.size_bytes === 'number' ? bytes(artifact.size_bytes) : 'larger'}; the start of it
          is shown.{' '}
          <span class="mono">
            git diff {k.base_commit.slice(0, 12)} {k.branch}
          </span>{' '}
          on the node has all of it.
        </p>
      )}
      {diff !== null && (
        <pre class="output diff" data-testid="diff">
          {diffLines(diff).map((l, i) => (
            // One block per line (no newline characters): an empty line keeps its height.
            <span key={i} class={`d-${l.kind}`}>
              {l.text || ' '}
            </span>
          ))}
        </pre>
      )}
    </Card>
  );
}
