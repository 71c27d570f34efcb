// The signature of attach.open (docs/architecture.md, An attach): the tower signs it with the node's
// attach secret, svcd checks it before dialling back.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { ATTACH_OPEN_MAX_AGE_MS } from './attach.js';
import { type AttachOpen, attachSigningString } from './control.js';

/** HMAC-SHA256 (hex) of an attach.open, keyed with the node's attach secret (control.ts). */
export function attachSignature(secret: string, m: Omit<AttachOpen, 'sig' | 'type' | 'who'>): string {
  return createHmac('sha256', secret).update(attachSigningString(m)).digest('hex');
}

/**
 * The node's check of an attach.open: null when the signature matches and it is fresh, else
 * the error code to answer with.
 */
export function checkAttachOpen(
  secret: string,
  m: AttachOpen,
  now: number,
): { code: 'secret_mismatch' | 'not_authorized'; message: string } | null {
  const want = Buffer.from(attachSignature(secret, m), 'hex');
  const got = Buffer.from(typeof m.sig === 'string' && /^[0-9a-f]{64}$/.test(m.sig) ? m.sig : '', 'hex');
  if (got.length !== want.length || !timingSafeEqual(got, want)) {
    return {
      code: 'secret_mismatch',
      message: "the attach request is not signed with this svcd's attach secret (svcd restarted? try again)",
    };
  }
  if (!Number.isFinite(m.ts) || Math.abs(now - m.ts) > ATTACH_OPEN_MAX_AGE_MS) {
    return {
      code: 'not_authorized',
      message: 'the attach request is stale (check the clocks of tower and node)',
    };
  }
  return null;
}
