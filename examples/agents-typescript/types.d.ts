// The wire contract of an agentmesh agent of the http protocol
// (docs/AGENTS.md, "The http protocol"), as TypeScript types. agent.mjs
// uses them through JSDoc, and `npm run typecheck` checks it with tsc.

/** A task from the mesh: the JSON body of its POST to the agent. */
export interface Task {
  /** The delegation record's id, the same on every retry: an idempotency key. */
  delegationId: string;
  /** The task text, or the user's current message on a routed delivery. */
  task: string;
  /** The caller's context with the mesh's depth (hops, this one included) and chain. */
  context: { depth: number; chain: string[]; [key: string]: unknown };
  /** Where an async agent (one that answered 202) POSTs its Outcome. */
  callbackUrl?: string;
  /** The conversation of a routed message from a known user. */
  session?: {
    id: string;
    /** The turns before this message, oldest first. */
    turns: { role: "user" | "agent"; content: string; agent?: string; time?: string }[];
    /** The state the agent last returned; {} at first. */
    workflowState: Record<string, unknown>;
  };
  user?: { id?: string; employeeId?: string; displayName?: string };
  locale?: string;
  entryPoint?: string;
  metadata?: Record<string, unknown>;
}

/** The body of a 200 reply. */
export interface Reply {
  /** Any JSON value; a routed user sees a string, or an object's "content". */
  result: unknown;
  /** Ends the routed conversation. */
  workflowComplete?: boolean;
  /** Replaces the session's state. */
  workflowState?: Record<string, unknown>;
}

/** The body of a callback to Task.callbackUrl. */
export type Outcome =
  | ({ status: "completed" } & Reply)
  | { status: "failed"; error: string };

/** The agent record the agent registers (POST /v1/agents), in part. */
export interface AgentRecord {
  name: string;
  description: string;
  capabilities: string[];
  examples?: string[];
  endpoint: string;
  ttlSeconds?: number;
  auth?: { type: "bearer"; token: string };
}
