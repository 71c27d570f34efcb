// The web console's route schemas (http/route-schema.ts): its page and bundle files.
import { media, noContent, route } from '../http/route-schema.js';

export const consoleSchemas = {
  index: route({
    summary: "The console's page",
    tags: ['console'],
    public: true,
    response: {
      200: media('text/html', 'index.html (Cache-Control: no-cache)'),
      304: noContent('not modified'),
    },
  }),
  asset: route({
    summary: 'A console bundle file',
    tags: ['console'],
    public: true,
    response: {
      200: media('*/*', 'the file (immutable, with an ETag)'),
      304: noContent('not modified'),
    },
    errors: ['not_found'],
  }),
};
