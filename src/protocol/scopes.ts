// Token scopes. admin implies work:write implies feed:read, so a writer can read back what
// it wrote; domains restrict every scope except admin's own administration routes.

export const SCOPES = ['feed:read', 'work:write', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

const RANK: Record<Scope, number> = { 'feed:read': 1, 'work:write': 2, admin: 3 };

export function isScope(s: string): s is Scope {
  return (SCOPES as readonly string[]).includes(s);
}

/** True when a principal holding `held` may call a route that requires `required`. */
export function scopeSatisfies(held: readonly Scope[], required: Scope): boolean {
  return held.some((s) => RANK[s] >= RANK[required]);
}
