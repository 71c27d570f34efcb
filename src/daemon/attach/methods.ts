// mgmt.sock methods of the attach gateway, as a table daemon.ts registers: attach.list.
import { type MgmtMethod, method } from '../mgmt/method.js';
import type { AttachGateway } from './gateway.js';

export function attachMethods(g: AttachGateway): MgmtMethod[] {
  return [method('attach.list', () => g.list())];
}
