// Runs before `npm install`: stop at once, with one line, on a Node.js svc does not support.
// CommonJS and ES5-safe on purpose: it must run (and say why) on any old Node.
const major = Number(process.versions.node.split('.')[0]);
if (major < 22) {
  console.error(
    `svc needs Node.js 22 or 24 (this is ${process.version}): install one from https://nodejs.org or with \`npx node@24\`, then run npm install again.`,
  );
  process.exit(1);
}
