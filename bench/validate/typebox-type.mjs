// bench/validate: TypeBox's own `Type`, handed to the protocol modules in place of ./type.js
// by schema-builder.mjs's module hook.
export { Type } from '@sinclair/typebox';
