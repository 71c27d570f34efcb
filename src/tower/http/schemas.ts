// The route schemas of the app's own routes (http/route-schema.ts): health, readiness, metrics.
import { Type } from '@sinclair/typebox';
import { described, media, route } from './route-schema.js';

export const healthSchemas = {
  healthz: route({
    summary: 'Liveness',
    tags: ['health'],
    public: true,
    response: { 200: described(Type.Object({ status: Type.Literal('ok') }), 'the process runs') },
  }),
  readyz: route({
    summary: 'Readiness',
    description: '503 `unavailable` (within 2 s) when the store does not answer or writes fail.',
    tags: ['health'],
    public: true,
    response: { 200: described(Type.Object({ status: Type.Literal('ready') }), 'ready for traffic') },
  }),
  metrics: route({
    summary: 'Prometheus metrics',
    tags: ['health'],
    response: { 200: media('text/plain', 'Prometheus text exposition format') },
  }),
};
