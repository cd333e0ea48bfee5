// The native addon (napi-rs), loaded once: `npm run build` puts it next to package.json.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

/** @type {import('../native.d.ts')} */
export const native = require('../native.cjs')
