// Small pieces every view uses: a record shown by name (id on hover, a copy button), a time
// shown as "3 min ago" (full time on hover), and a clock that re-renders them.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ago, fullTime } from './format.js';
import { directory, type RefKind } from './names.js';

/** Now, updated every `everyMs` while the component is mounted. */
export function useNow(everyMs = 15_000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}

/** Re-renders when the directory of names changes. */
export function useDirectory(): void {
  const [, tick] = useState(0);
  useEffect(() => directory.subscribe(() => tick((n) => n + 1)), []);
}

export function CopyButton(props: { text: string; label: string; children?: ComponentChildren }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class="copy"
      aria-label={props.label}
      title={done ? 'Copied' : `Copy ${props.text}`}
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(props.text);
          setDone(true);
          setTimeout(() => setDone(false), 1500);
        } catch {
          // No clipboard (an insecure origin): the id stays on hover to select by hand.
        }
      }}
    >
      {done ? 'copied' : (props.children ?? 'copy')}
    </button>
  );
}

/** A domain, mission, agent or node by name; its id on hover and a copy button. */
export function Ref(props: { kind: RefKind; id: string | null | undefined; copy?: boolean }) {
  useDirectory();
  const { id } = props;
  if (!id) return <span class="muted">—</span>;
  const name = directory.name(props.kind, id);
  return (
    <span class="ref" data-ref={props.kind} data-id={id}>
      <span title={`${props.kind} ${id}`}>{name ?? shortId(id)}</span>
      {props.copy !== false && <CopyButton text={id} label={`Copy id of ${props.kind} ${name ?? id}`} />}
    </span>
  );
}

/** `mt_01kb…x9q`: enough to tell ids apart when there is no name. */
export function shortId(id: string): string {
  return id.length > 14 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id;
}

export function Time(props: { iso: string | null | undefined; now: number }) {
  if (!props.iso) return <span class="muted">—</span>;
  return (
    <time dateTime={props.iso} title={fullTime(props.iso)}>
      {ago(props.iso, props.now)}
    </time>
  );
}

/** A titled section of a page (the task page's sections). */
export function Card(props: { title: string; testid?: string; children: ComponentChildren }) {
  return (
    <div class="card section" data-testid={props.testid}>
      <h3>{props.title}</h3>
      {props.children}
    </div>
  );
}

/** What the last action came to: an error (role alert) and/or a notice (role status). */
export function Outcome(props: { error?: string | null; notice?: string | null }) {
  return (
    <>
      {props.error && (
        <p role="alert" class="error">
          {props.error}
        </p>
      )}
      {props.notice && (
        <p role="status" class="ok">
          {props.notice}
        </p>
      )}
    </>
  );
}
