// What the doctor observed, as plain data: probe.ts gathers it, checks.ts judges it. Keeping
// the two apart lets every verdict be tested from a table of facts without a machine to break.
import type { NodeIdentity } from '../../protocol/nodes.js';

export interface PathFact {
  path: string;
  kind: 'missing' | 'dir' | 'file' | 'socket' | 'other';
  /** Permission bits (mode & 0o7777), null when missing. */
  mode: number | null;
  uid: number | null;
  /** Whether this process may write (and, for a directory, create entries) there. */
  writable: boolean;
  /** An error other than "missing" (EACCES on a parent, ...). */
  error: string | null;
}

/** One HTTP request's outcome: a status and body, or why there was none. */
export type HttpProbe = { ok: true; status: number; body: string } | { ok: false; error: string };

export interface ToolFact {
  name: string;
  /** Where it was found on PATH, or null. */
  path: string | null;
}

export interface DoctorFacts {
  now: number;
  uid: number;
  home: PathFact;
  skillsHome: PathFact & { fromEnv: boolean };
  agentId: { file: string; value: string | null; error: string | null };
  identity: {
    file: string;
    /** Why this file (SVC_NODE_FILE, SVC_HOME, the system file, the running svcd's). */
    why: string;
    fact: PathFact;
    identity: NodeIdentity | null;
    /** Why it could not be read (missing, not JSON, lacks a field). */
    error: string | null;
  };
  /** The tower svcd uses: the running daemon's, else the identity's, else the operator's. */
  tower: { url: string; source: 'daemon' | 'identity' | 'operator'; health: HttpProbe };
  /** GET /nodes/{node_id} with the node JWT; null when there is no identity or no tower. */
  nodeAuth: HttpProbe | null;
  /** The operator's credential (flags, SVC_TOKEN, credentials.json, local admin token). */
  operator: {
    url: string | null;
    hasToken: boolean;
    /** Set when the credentials could not be resolved (bad URL, unreadable file). */
    error: string | null;
    /** GET /nodes with the token; null when there is no token or no URL. */
    probe: HttpProbe | null;
  };
  /** daemon.status over mgmt.sock, or why it did not answer. */
  daemon: { status: Record<string, unknown> | null; error: string | null };
  svcdDir: PathFact;
  sockets: PathFact[];
  tools: ToolFact[];
  systemctl: {
    path: string | null;
    userBus: boolean;
    /** `systemctl --user is-system-running`, when there is a systemctl and a bus. */
    result: { code: number; out: string } | null;
  };
  /** The fan-out's status: from `fanout.status`, else daemon.status components.fanout. */
  fanout:
    | { source: 'fanout.status' | 'daemon.status'; status: Record<string, unknown> }
    | { source: null; reason: string };
}
