// The package version (lib/version.ts), as the CLI prints it.
export { VERSION } from '../lib/version.js';
