// mgmt.sock methods of the fan-out, as a table daemon.ts registers: fanout.status (svc system
// doctor reads it) and events.subscribe / events.unsubscribe (subscribe.ts owns the streams).
import { type MgmtMethod, method } from '../mgmt/method.js';
import type { Fanout } from './fanout.js';
import { eventMethods } from './subscribe.js';

export function fanoutMethods(f: Fanout): MgmtMethod[] {
  return [
    method('fanout.status', async () => f.details()),
    ...eventMethods({ listener: () => f.listener() }),
  ];
}
